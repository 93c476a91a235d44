//! Writes the generated loopback-client outage trace (see `src/client.rs`) to
//! standard output: `cargo run -p cutout-tune --example client_outage > tune/traces/client.csv`.

fn main() -> std::io::Result<()> {
    cutout_tune::client::outage().write_csv(std::io::stdout().lock())
}
