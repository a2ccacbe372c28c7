//! atc's fast, hermetic integration tests: one crate (one link), sorted by what they
//! prove, in folders named as TESTING.md's sections are: `promises/` (each promise and the
//! tests that keep it), `faults/`, `commands/`, `docs/`, `fake/`. The simulation
//! (`tests/sim`), the crash points (`tests/crash.rs`) and the real-QwenPaw scenarios
//! (`tests/e2e`) are binaries of their own; `tests/support` is shared by all of them.

#[path = "../support/mod.rs"]
mod support;

mod commands;
mod docs;
mod fake;
mod faults;
mod promises;
