//! The job file on disk: its schema and locked read-modify-write (`store`), the sidecar
//! locks (`lock`, the only caller of the std lock APIs) and atomic writes (`fsutil`).

pub mod fsutil;
pub mod lock;
pub mod store;

pub use store::{JobFile, Store};
