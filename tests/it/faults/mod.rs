//! Faults: a server, a disk, a file or an input that misbehaves, and hostile input.

mod attacks;
mod disk;
mod edges;
mod fuzz;
mod server_faults;
mod validators;
