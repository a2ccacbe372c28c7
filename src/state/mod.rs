//! The job file on disk (what it holds is `job_file`): loading, checking and the locked
//! read-modify-write (`store`), the sidecar locks (`lock`, the only caller of the std
//! lock APIs), atomic writes (`fsutil`), the event log beside it (`journal`), and which of
//! those files atc trusts (`guard`: no links, only the user's own, private files in
//! private directories).

pub mod fsutil;
pub mod guard;
pub mod journal;
pub mod lock;
pub mod store;

pub use store::Store;
