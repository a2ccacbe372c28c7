//! Commands: each command and its documented exit codes, through the real binary.

mod cli;
mod for_people;
mod qwenpaw_plugin;
mod task_check;
mod tick;
