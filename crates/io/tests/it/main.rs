//! Integration tests of tierkv-io: one binary, one module per area.

mod bad_input;
mod equivalence;
mod methods;
mod sim;
mod stress;
