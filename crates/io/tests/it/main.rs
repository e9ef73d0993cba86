//! Integration tests of tierkv-io: one binary, one module per area.

mod bad_input;
mod dirs;
mod equivalence;
mod locks;
mod methods;
mod sim;
