//! WebSocket connections of the tools that read the service's feeds (`loadgen`, `bench
//! fanout`): one configuration for all of them.

use std::net::TcpStream;

use tungstenite::protocol::WebSocketConfig;
use tungstenite::stream::MaybeTlsStream;
use tungstenite::WebSocket;

/// The buffer a feed's frames are read into. tungstenite's default (128 KiB) is zeroed whole
/// before every read: with frames of a few hundred bytes that was most of a feed thread's
/// work, and 128 KiB of memory per connection. A larger burst takes a few reads.
const READ_BUFFER_BYTES: usize = 16 * 1024;

/// A WebSocket client connection to `url`, or why there is none.
pub fn connect(url: &str) -> Result<WebSocket<MaybeTlsStream<TcpStream>>, String> {
    let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER_BYTES);
    tungstenite::client::connect_with_config(url, Some(config), 3)
        .map(|(ws, _)| ws)
        .map_err(|e| e.to_string())
}
