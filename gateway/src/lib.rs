//! Ladder's HTTP/1.1 and WebSocket gateway on mio.
