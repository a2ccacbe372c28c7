//! The job file on disk: its schema and locked read-modify-write (`store`), the sidecar
//! locks (`lock`, the only caller of the std lock APIs), atomic writes (`fsutil`) and the
//! event log beside it (`journal`).

pub mod fsutil;
pub mod journal;
pub mod lock;
pub mod store;

pub use store::{JobFile, Store};
