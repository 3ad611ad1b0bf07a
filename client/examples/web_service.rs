//! The client in a web service's shared state: one `Client` (cheap to clone, pooled,
//! shared by every request) and one `SegmentBuffer` per key, built once at start-up. A
//! bare HTTP/1.1 server on tokio, so the example needs nothing beyond the client; with axum
//! or hyper the state is the same `Arc<AppState>`.
//!
//! ```sh
//! scripts/demo.sh --keep
//! cargo run -p idgen-client --example web_service -- redis://127.0.0.1:PORT/ 127.0.0.1:8080
//! curl http://127.0.0.1:8080/order-id     # a snowflake ID, one round trip to Redis
//! curl http://127.0.0.1:8080/invoice      # a segment value, from the local buffer
//! ```

use std::sync::Arc;

use idgen_client::{Client, SegmentBuffer, SegmentOptions, Topology};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What every request handler shares.
struct AppState {
    ids: Client,
    invoices: SegmentBuffer,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let redis = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".into());
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let ids = Client::connect(Topology::single(redis)?).await?;
    let invoices = ids.segment_buffer("invoice", SegmentOptions::default());
    let state = Arc::new(AppState { ids, invoices });

    let listener = TcpListener::bind(&listen).await?;
    println!("listening on http://{listen}/ (GET /order-id, GET /invoice)");
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(serve(stream, state.clone()));
    }
}

/// Answers one request; a failed ID call is a 503, so a load balancer can retry elsewhere.
async fn serve(mut stream: TcpStream, state: Arc<AppState>) {
    let mut request = [0u8; 1024];
    let Ok(read) = stream.read(&mut request).await else {
        return;
    };
    let head = String::from_utf8_lossy(&request[..read]);
    let path = head.split_whitespace().nth(1).unwrap_or("/");
    let (status, body) = match path {
        "/order-id" => match state.ids.next_snowflake("orders").await {
            Ok(id) => ("200 OK", id.to_string()),
            Err(error) => ("503 Service Unavailable", error.to_string()),
        },
        "/invoice" => match state.invoices.next().await {
            Ok(value) => ("200 OK", value.to_string()),
            Err(error) => ("503 Service Unavailable", error.to_string()),
        },
        _ => ("404 Not Found", "try /order-id or /invoice".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}\n",
        body.len() + 1
    );
    let _ = stream.write_all(response.as_bytes()).await;
}
