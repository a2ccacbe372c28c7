//! Docs: what the README, the guide, the man pages and the completions say is true.

mod estimates;
mod generated;
mod install;
mod links;
