#![allow(dead_code)]

pub mod atc;
pub mod bodies;
pub mod chats;
pub mod fake;
pub mod hermetic;
pub mod rng;
pub mod scene;
pub mod shape;
