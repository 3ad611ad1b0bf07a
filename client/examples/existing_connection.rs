//! idgen's commands on a redis-rs connection the application already has — here a
//! `ConnectionManager`, which reconnects by itself — through `IdgenAsyncCommands`, and in a
//! pipeline with the application's own commands.
//!
//! ```sh
//! cargo run -p idgen-client --example existing_connection -- redis://127.0.0.1:PORT/
//! ```

use idgen_client::commands::build;
use idgen_client::{IdFormat, IdgenAsyncCommands};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".to_string());
    let client = redis::Client::open(url)?;
    let mut con = client.get_connection_manager().await?;

    let id: u64 = con.snowflake_next("orders").await?;
    let for_javascript: String = con.snowflake_next_as("orders", IdFormat::Decimal).await?;
    let invoice: i64 = con.segment_next("invoice").await?;
    println!("order {id}, order as a string {for_javascript}, invoice {invoice}");

    // One round trip: a new order's ID and the application's own write.
    let (order,): (u64,) = redis::pipe()
        .add_command(build::snowflake_next("orders"))
        .cmd("SET")
        .arg("last-order-at")
        .arg("now")
        .ignore()
        .query_async(&mut con)
        .await?;
    println!("order {order} recorded");
    Ok(())
}
