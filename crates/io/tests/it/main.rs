//! Integration tests of tierkv-io: one binary, one module per area.

mod methods;
mod sim;
mod stress;
