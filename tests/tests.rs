//! Integration tests of bts: one test binary, a module per concern.

mod util;

mod bnb;
mod checkpoints;
mod cli;
mod examples;
mod legacy;
mod library;
mod lrs;
mod monitor;
mod polling;
mod remote;
