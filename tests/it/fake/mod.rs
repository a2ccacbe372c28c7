//! The fake QwenPaw: its self-tests, and its bodies pinned to the real server's.

mod contract_shape;
mod fake_server;
