//! The promises: each is kept by the tests named under it in TESTING.md.

mod autowatch;
mod backoff;
mod batch;
mod config;
mod delivery;
mod frontend;
mod im;
mod kick;
mod long;
mod render;
mod rewatch;
mod seed_parity;
mod tree;
mod turns;
