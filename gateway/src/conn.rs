//! One client connection: bytes in, requests parsed in order, responses out in the same
//! order even when later requests are answered before earlier ones (pipelining).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::Instant;

use crate::stream::Stream;

use crate::handler::Completer;
use crate::http::{Response, BATCH_CANCEL_BODY_BYTES_MAX, HEADER_BYTES_MAX};

/// Most requests of one connection in flight (parsed, their answers not yet handed to the
/// socket); past it, parsing pauses. It also bounds what one connection is served in one turn
/// of its loop, before the other connections' turn.
pub const IN_FLIGHT_MAX: usize = 64;
/// Unsent output past which parsing pauses until the client reads: a client that pipelines
/// and never reads holds this much, not an answer for everything it sends.
pub const WRITE_PAUSE_BYTES: usize = 256 * 1024;
/// Largest buffered input: one full request plus a little of the next.
pub const READ_BUFFER_MAX: usize = HEADER_BYTES_MAX + BATCH_CANCEL_BODY_BYTES_MAX + 4096;
/// Largest unsent output before the connection is considered stuck and closed.
pub const WRITE_BUFFER_MAX: usize = 8 * 1024 * 1024;
/// Room each buffer starts with.
const BUFFER_START_BYTES: usize = 4096;
/// Room an empty buffer may keep after a large request or response: more is given back, so
/// that an idle connection does not hold the largest it ever moved (up to `WRITE_BUFFER_MAX`).
const IDLE_BUFFER_KEPT_BYTES: usize = 64 * 1024;

/// A response slot in request order.
pub enum Slot {
    /// Waiting for the sequencer.
    Pending {
        /// Serial number of the request on this connection.
        serial: u64,
        /// Turns the completion into the response.
        completer: Completer,
        /// Whether the request was HEAD.
        head_only: bool,
    },
    /// Ready to write.
    Ready(Vec<u8>),
}

/// A client connection.
pub struct Connection {
    /// The socket.
    pub stream: Stream,
    /// The peer.
    pub peer: SocketAddr,
    /// Unparsed input.
    pub read_buf: Vec<u8>,
    /// Output not yet written.
    pub write_buf: Vec<u8>,
    /// Responses in request order.
    pub slots: VecDeque<Slot>,
    /// Serial of the next request.
    pub next_serial: u64,
    /// When the first byte of the request being received arrived.
    pub request_started: Option<Instant>,
    /// Last time anything happened.
    pub last_active: Instant,
    /// Last time output was written (or the connection opened): output that waits longer
    /// than the request timeout means a client that does not read.
    pub last_written: Instant,
    /// Close once everything queued is written.
    pub close_after_flush: bool,
    /// Parse no further requests (the last one asked to close).
    pub stop_reading: bool,
    /// Token generation, to tell a reused token from this connection.
    pub generation: u32,
    /// When it was accepted.
    pub opened: Instant,
    /// Whether any request byte has arrived (after the TLS handshake, with TLS).
    pub received_any: bool,
    /// How far the request at the front of `read_buf` has been read.
    pub progress: crate::http::RequestProgress,
    /// The last read stopped with `read_buf` full: the socket may hold more, and no new
    /// readiness event will say so (edge-triggered), so it is read again once there is room.
    pub capped: bool,
    /// Parsing stopped because the client had not taken its answers ([`Self::waits_for_client`]):
    /// it resumes once a flush made room.
    pub paused_for_client: bool,
    /// The peer closed its sending side: once the requests it sent are all parsed, the
    /// connection closes after their answers.
    pub peer_closed: bool,
}

impl Connection {
    /// A new connection.
    pub fn new(stream: Stream, peer: SocketAddr, generation: u32) -> Connection {
        Connection {
            stream,
            peer,
            read_buf: Vec::with_capacity(BUFFER_START_BYTES),
            write_buf: Vec::with_capacity(BUFFER_START_BYTES),
            slots: VecDeque::new(),
            next_serial: 0,
            request_started: None,
            last_active: Instant::now(),
            last_written: Instant::now(),
            close_after_flush: false,
            stop_reading: false,
            generation,
            opened: Instant::now(),
            received_any: false,
            progress: crate::http::RequestProgress::default(),
            capped: false,
            paused_for_client: false,
            peer_closed: false,
        }
    }

    /// Reads what the socket has. Returns `Ok(false)` when the peer closed.
    ///
    /// A plain socket is read until a read comes back shorter than asked, unless
    /// `until_closed` (the event said the peer closed its side): the kernel had no more then,
    /// and bytes that come later raise a new readiness event. That saves the read that would
    /// only answer "would block": one system call per request. TLS reads until "would block",
    /// since one socket read may hold more than one record.
    pub fn fill(&mut self, until_closed: bool) -> io::Result<bool> {
        let mut chunk = [0u8; 16 * 1024];
        let stops_short = !until_closed && self.stream.is_plain();
        self.capped = false;
        loop {
            if self.read_buf.len() >= READ_BUFFER_MAX {
                self.capped = true;
                return Ok(true);
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    if self.read_buf.is_empty() && self.request_started.is_none() {
                        self.request_started = Some(Instant::now());
                    }
                    self.read_buf.extend_from_slice(&chunk[..n]);
                    self.last_active = Instant::now();
                    self.received_any = true;
                    if stops_short && n < chunk.len() {
                        return Ok(true);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Queues a slot that `completer` fills once its work completes; returns the slot's
    /// serial and the connection's generation, which name it to whoever completes it.
    pub fn push_pending(&mut self, completer: Completer, head_only: bool) -> (u64, u32) {
        let serial = self.next_serial;
        self.next_serial += 1;
        self.slots.push_back(Slot::Pending {
            serial,
            completer,
            head_only,
        });
        (serial, self.generation)
    }

    /// Queues a ready response.
    pub fn push_ready(&mut self, response: &Response, head_only: bool) {
        let mut bytes = Vec::with_capacity(response.body.len() + 128);
        response.write_to(&mut bytes, head_only);
        if response.close {
            self.close_after_flush = true;
        }
        self.slots.push_back(Slot::Ready(bytes));
    }

    /// Queues an interim answer (`100 Continue`), written in turn after the answers before it.
    pub fn push_interim(&mut self, bytes: &[u8]) {
        self.slots.push_back(Slot::Ready(bytes.to_vec()));
    }

    /// Fills the pending slot `serial` with its response.
    pub fn complete(&mut self, serial: u64, response_of: impl FnOnce(Completer) -> Response) {
        for slot in self.slots.iter_mut() {
            if let Slot::Pending { serial: s, .. } = slot {
                if *s == serial {
                    let Slot::Pending {
                        completer,
                        head_only,
                        ..
                    } = std::mem::replace(slot, Slot::Ready(Vec::new()))
                    else {
                        unreachable!("matched a pending slot");
                    };
                    let response = response_of(completer);
                    if response.close {
                        self.close_after_flush = true;
                    }
                    let mut bytes = Vec::with_capacity(response.body.len() + 128);
                    response.write_to(&mut bytes, head_only);
                    *slot = Slot::Ready(bytes);
                    return;
                }
            }
        }
    }

    /// Gives the pending slot `serial` a new completer (a deferred request that went on to
    /// the sequencer).
    pub fn replace_completer(&mut self, serial: u64, new: Completer) {
        for slot in self.slots.iter_mut() {
            if let Slot::Pending {
                serial: s,
                completer,
                ..
            } = slot
            {
                if *s == serial {
                    *completer = new;
                    return;
                }
            }
        }
    }

    /// Whether bytes wait to be parsed: in the read buffer, or in the socket behind a full
    /// buffer.
    pub fn has_input_waiting(&self) -> bool {
        !self.read_buf.is_empty() || self.capped
    }

    /// Number of requests waiting for an answer.
    pub fn pending(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::Pending { .. }))
            .count()
    }

    /// Whether parsing waits for the client: [`IN_FLIGHT_MAX`] answers not yet handed to the
    /// socket, or [`WRITE_PAUSE_BYTES`] of output it has not read.
    pub fn waits_for_client(&self) -> bool {
        self.slots.len() >= IN_FLIGHT_MAX || self.write_buf.len() >= WRITE_PAUSE_BYTES
    }

    /// Whether output waits for the client: bytes not yet written to the socket (TLS
    /// records the library holds included).
    pub fn has_unsent(&self) -> bool {
        !self.write_buf.is_empty() || !self.slots.is_empty() || self.stream.has_pending_output()
    }

    /// Whether output has waited for the client longer than `timeout` with nothing written.
    pub fn unread_for(&self, now: Instant, timeout: std::time::Duration) -> bool {
        !self.write_buf.is_empty()
            && self.last_written < now
            && now.duration_since(self.last_written) > timeout
    }

    /// Moves ready responses at the front into the write buffer and writes what the
    /// socket takes. Returns `Ok(true)` when everything queued is written.
    pub fn flush(&mut self) -> io::Result<bool> {
        if self.write_buf.is_empty() {
            // Nothing was waiting: the clock of unread output starts with what comes now.
            self.last_written = Instant::now();
        }
        while let Some(Slot::Ready(_)) = self.slots.front() {
            if let Some(Slot::Ready(bytes)) = self.slots.pop_front() {
                self.write_buf.extend_from_slice(&bytes);
            }
        }
        let mut written = 0;
        while written < self.write_buf.len() {
            match self.stream.write(&self.write_buf[written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.write_buf.drain(..written);
        // TLS records the library still holds go out too.
        match self.stream.flush() {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        if written > 0 {
            self.last_active = Instant::now();
            self.last_written = self.last_active;
        }
        if self.write_buf.len() > WRITE_BUFFER_MAX {
            return Err(io::Error::other("client does not read its responses"));
        }
        self.release_idle_room();
        Ok(self.write_buf.is_empty() && self.slots.is_empty())
    }

    /// Gives back the room of an empty buffer grown past [`IDLE_BUFFER_KEPT_BYTES`].
    fn release_idle_room(&mut self) {
        for buffer in [&mut self.read_buf, &mut self.write_buf] {
            if buffer.is_empty() && buffer.capacity() > IDLE_BUFFER_KEPT_BYTES {
                buffer.shrink_to(BUFFER_START_BYTES);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection over a loopback socket, and the client's end.
    fn connection() -> (Connection, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, peer) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let stream = Stream::new(mio::net::TcpStream::from_std(server), None).unwrap();
        (Connection::new(stream, peer, 0), client)
    }

    #[test]
    fn a_large_response_leaves_no_large_buffer_once_it_is_written() {
        let (mut conn, mut client) = connection();
        let large = vec![b'x'; 1 << 20];
        conn.slots.push_back(Slot::Ready(large.clone()));
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; large.len()];
            client.read_exact(&mut got).unwrap();
            got == large
        });
        while !conn.flush().unwrap() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(reader.join().unwrap());
        assert!(conn.write_buf.capacity() <= IDLE_BUFFER_KEPT_BYTES);
        // A small buffer is kept as it is.
        conn.read_buf.reserve(IDLE_BUFFER_KEPT_BYTES / 2);
        let kept = conn.read_buf.capacity();
        conn.release_idle_room();
        assert_eq!(conn.read_buf.capacity(), kept);
        conn.read_buf.reserve(2 * IDLE_BUFFER_KEPT_BYTES);
        conn.release_idle_room();
        assert!(conn.read_buf.capacity() <= IDLE_BUFFER_KEPT_BYTES);
    }
}
