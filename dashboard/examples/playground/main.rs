//! The breaker playground: a simulated dependency with sliders for its failure
//! rate and latency and for the caller's timeout, two lanes of callers side by
//! side (through a real breaker, and with only a timeout), and the dashboard.
//!
//! `cargo run --release -p cutout-dashboard --example playground [PORT]`, then
//! open the printed URL. It listens on loopback only.

mod sim;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let playground = sim::Playground::new();
    playground.start();
    println!("playground: http://{}/", listener.local_addr()?);
    println!("dashboard:  http://{}/dashboard", listener.local_addr()?);
    axum::serve(listener, sim::app(playground)).await
}
