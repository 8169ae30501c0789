//! The replication link's security: a Noise `NNpsk0` handshake (the `snow` crate) keyed by the
//! operators' shared secret, then every byte in both directions encrypted and authenticated
//! (ChaCha20-Poly1305).
//!
//! The standby speaks first. Its first message is sealed under a key mixed from the secret,
//! so a primary that cannot open it (a peer without the secret, a port scanner, a plain-text
//! handshake) closes the connection having sent nothing at all. The primary's answer is
//! sealed the same way, so a standby never follows a primary that lacks the secret. Each
//! session has fresh ephemeral keys: a recorded session can be neither read nor replayed.
//!
//! On the wire every Noise message is a frame `len u16 | message` (big-endian, at most
//! 65,535 bytes); a plaintext stream is cut into frames of at most [`FRAME_PLAINTEXT_MAX`]
//! bytes. [`SecureReader`] keeps a frame that has only partly arrived across read timeouts.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use snow::{HandshakeState, StatelessTransportState};

/// The Noise protocol of the link.
pub const NOISE_PARAMS: &str = "Noise_NNpsk0_25519_ChaChaPoly_SHA256";
/// Largest Noise message (and frame body).
pub const FRAME_MAX: usize = 65_535;
/// Authentication tag added to each sealed message.
const TAG_BYTES: usize = 16;
/// Largest plaintext carried by one frame.
pub const FRAME_PLAINTEXT_MAX: usize = FRAME_MAX - TAG_BYTES;
/// Fewest bytes a secret file must hold (after surrounding whitespace is trimmed).
pub const SECRET_BYTES_MIN: usize = 16;
/// Prologue bound into the handshake: both ends must speak this version of the link.
const PROLOGUE: &[u8] = b"ladder replication 3";
/// Domain separation of the pre-shared key derived from a secret.
const PSK_DOMAIN: &[u8] = b"ladder replication psk v1\0";

/// The key both ends of a replication link share.
#[derive(Clone)]
pub struct LinkSecret {
    psk: [u8; 32],
    configured: bool,
}

impl std::fmt::Debug for LinkSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkSecret")
            .field("configured", &self.configured)
            .finish_non_exhaustive()
    }
}

impl LinkSecret {
    /// The secret of `--replication-secret-file`: the file's bytes, surrounding whitespace
    /// trimmed, at least [`SECRET_BYTES_MIN`] of them.
    pub fn from_file(path: &Path) -> Result<LinkSecret, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        LinkSecret::from_bytes(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The secret held in `bytes` (surrounding whitespace trimmed).
    pub fn from_bytes(bytes: &[u8]) -> Result<LinkSecret, String> {
        let trimmed = bytes.trim_ascii();
        if trimmed.len() < SECRET_BYTES_MIN {
            return Err(format!(
                "a replication secret must hold at least {SECRET_BYTES_MIN} bytes, this one holds {}",
                trimmed.len()
            ));
        }
        let mut hasher = Sha256::new();
        hasher.update(PSK_DOMAIN);
        hasher.update(trimmed);
        Ok(LinkSecret {
            psk: hasher.finalize().into(),
            configured: true,
        })
    }

    /// The key of a link run without a secret file, allowed on loopback only: the link is
    /// encrypted, but any local process can follow (the data directory's files are as open
    /// to it).
    pub fn loopback_default() -> LinkSecret {
        let mut hasher = Sha256::new();
        hasher.update(PSK_DOMAIN);
        hasher.update(b"loopback, no secret configured");
        LinkSecret {
            psk: hasher.finalize().into(),
            configured: false,
        }
    }

    /// Whether the secret came from a file (not [`LinkSecret::loopback_default`]).
    pub fn is_configured(&self) -> bool {
        self.configured
    }

    fn builder(&self) -> Result<snow::Builder<'_>, String> {
        let params = NOISE_PARAMS.parse().map_err(|e| format!("noise: {e}"))?;
        snow::Builder::new(params)
            .prologue(PROLOGUE)
            .and_then(|b| b.psk(0, &self.psk))
            .map_err(|e| format!("noise: {e}"))
    }
}

/// The two halves of an established link.
pub type Link = (SecureReader, SecureWriter);

/// The standby's side: sends `hello` in the first message, reads the primary's answer, and
/// returns it with the link.
pub fn connect(
    stream: &TcpStream,
    secret: &LinkSecret,
    hello: &[u8],
) -> Result<(Vec<u8>, Link), String> {
    let (mut noise, message) = seal_hello(secret, hello)?;
    write_frame(&mut &*stream, &message).map_err(|e| format!("handshake: {e}"))?;
    let frame = read_frame_until(stream, Instant::now() + HANDSHAKE_TIMEOUT)
        .map_err(|e| format!("handshake answer: {e}"))?;
    let mut answer = vec![0u8; FRAME_MAX];
    let len = noise.read_message(&frame, &mut answer).map_err(|_| {
        "the primary's answer does not open with this secret \
         (is --replication-secret-file the same on both?)"
            .to_string()
    })?;
    answer.truncate(len);
    Ok((answer, split(stream, noise)?))
}

/// How long a peer has to complete its part of the handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A standby whose first message opened: what it said, and the handshake awaiting the
/// primary's answer.
pub struct Opened {
    /// The standby's hello (its handshake line).
    pub hello: Vec<u8>,
    noise: HandshakeState,
}

/// The primary's side, first half: reads the standby's first message within
/// [`HANDSHAKE_TIMEOUT`]. A message that does not open with the secret is an error, and
/// nothing has been sent.
pub fn open(stream: &TcpStream, secret: &LinkSecret) -> Result<Opened, String> {
    let frame = read_frame_until(stream, Instant::now() + HANDSHAKE_TIMEOUT)
        .map_err(|e| format!("handshake: {e}"))?;
    open_frame(secret, &frame)
}

/// Opens a standby's first message (one frame's body) with the secret.
pub fn open_frame(secret: &LinkSecret, frame: &[u8]) -> Result<Opened, String> {
    let mut noise = secret
        .builder()?
        .build_responder()
        .map_err(|e| format!("noise: {e}"))?;
    let mut hello = vec![0u8; FRAME_MAX];
    let len = noise
        .read_message(frame, &mut hello)
        .map_err(|_| "the peer's first message does not open with the replication secret")?;
    hello.truncate(len);
    Ok(Opened { hello, noise })
}

/// A standby's first message carrying `hello`, sealed with the secret (what [`connect`]
/// sends; for tests and the fuzz corpus).
pub fn first_message(secret: &LinkSecret, hello: &[u8]) -> Result<Vec<u8>, String> {
    seal_hello(secret, hello).map(|(_, message)| message)
}

/// The initiator's handshake, and its first message carrying `hello`.
fn seal_hello(secret: &LinkSecret, hello: &[u8]) -> Result<(HandshakeState, Vec<u8>), String> {
    let mut noise = secret
        .builder()?
        .build_initiator()
        .map_err(|e| format!("noise: {e}"))?;
    let mut message = vec![0u8; FRAME_MAX];
    let len = noise
        .write_message(hello, &mut message)
        .map_err(|e| format!("handshake: {e}"))?;
    message.truncate(len);
    Ok((noise, message))
}

impl Opened {
    /// The primary's side, second half: sends `answer` and returns the link.
    pub fn answer(mut self, stream: &TcpStream, answer: &[u8]) -> Result<Link, String> {
        let mut message = vec![0u8; FRAME_MAX];
        let len = self
            .noise
            .write_message(answer, &mut message)
            .map_err(|e| format!("handshake: {e}"))?;
        write_frame(&mut &*stream, &message[..len]).map_err(|e| format!("handshake: {e}"))?;
        split(stream, self.noise)
    }
}

fn split(stream: &TcpStream, noise: HandshakeState) -> Result<Link, String> {
    let noise = Arc::new(
        noise
            .into_stateless_transport_mode()
            .map_err(|e| format!("noise: {e}"))?,
    );
    let reader = SecureReader {
        stream: stream.try_clone().map_err(|e| e.to_string())?,
        noise: noise.clone(),
        nonce: 0,
        frame: Vec::with_capacity(FRAME_MAX),
        frame_len: None,
        head: [0; 2],
        head_filled: 0,
        plain: Vec::with_capacity(FRAME_MAX),
        plain_read: 0,
    };
    let writer = SecureWriter {
        stream: stream.try_clone().map_err(|e| e.to_string())?,
        noise,
        nonce: 0,
        sealed: vec![0u8; 2 + FRAME_MAX],
    };
    Ok((reader, writer))
}

fn write_frame(stream: &mut impl Write, message: &[u8]) -> io::Result<()> {
    let len = u16::try_from(message.len()).map_err(|_| io::Error::other("frame too long"))?;
    let mut frame = Vec::with_capacity(2 + message.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(message);
    stream.write_all(&frame)?;
    stream.flush()
}

/// One whole frame, arriving before `deadline` (a peer that trickles bytes is cut off there).
fn read_frame_until(stream: &TcpStream, deadline: Instant) -> io::Result<Vec<u8>> {
    let mut head = [0u8; 2];
    read_exact_until(stream, &mut head, deadline)?;
    let mut frame = vec![0u8; u16::from_be_bytes(head) as usize];
    read_exact_until(stream, &mut frame, deadline)?;
    Ok(frame)
}

fn read_exact_until(stream: &TcpStream, buf: &mut [u8], deadline: Instant) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "handshake deadline passed",
            ));
        }
        stream.set_read_timeout(Some(left))?;
        match (&*stream).read(&mut buf[filled..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The receiving half: decrypts frames into a byte stream.
pub struct SecureReader {
    stream: TcpStream,
    noise: Arc<StatelessTransportState>,
    nonce: u64,
    frame: Vec<u8>,
    frame_len: Option<usize>,
    head: [u8; 2],
    head_filled: usize,
    plain: Vec<u8>,
    plain_read: usize,
}

impl SecureReader {
    /// The socket under the link (to set its read timeout).
    pub fn socket(&self) -> &TcpStream {
        &self.stream
    }

    /// Reads until one more frame is whole and opens it. An error of the socket (a read
    /// timeout included) leaves what arrived in place, to go on from at the next call.
    fn next_frame(&mut self) -> io::Result<bool> {
        while self.frame_len.is_none() {
            match self.stream.read(&mut self.head[self.head_filled..])? {
                0 if self.head_filled == 0 => return Ok(false),
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => self.head_filled += n,
            }
            if self.head_filled == 2 {
                self.frame_len = Some(u16::from_be_bytes(self.head) as usize);
                self.frame.clear();
            }
        }
        let want = self.frame_len.unwrap_or(0);
        while self.frame.len() < want {
            let mut chunk = [0u8; 16 * 1024];
            let room = (want - self.frame.len()).min(chunk.len());
            match self.stream.read(&mut chunk[..room])? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => self.frame.extend_from_slice(&chunk[..n]),
            }
        }
        self.plain.resize(FRAME_MAX, 0);
        let len = self
            .noise
            .read_message(self.nonce, &self.frame, &mut self.plain)
            .map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidData, "a frame failed authentication")
            })?;
        self.nonce += 1;
        self.plain.truncate(len);
        self.plain_read = 0;
        self.frame_len = None;
        self.head_filled = 0;
        Ok(true)
    }
}

impl Read for SecureReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.plain_read == self.plain.len() {
            if !self.next_frame()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.plain.len() - self.plain_read);
        buf[..n].copy_from_slice(&self.plain[self.plain_read..self.plain_read + n]);
        self.plain_read += n;
        Ok(n)
    }
}

/// The sending half: each write seals at most [`FRAME_PLAINTEXT_MAX`] bytes into one frame
/// (put a `BufWriter` in front to send few, full frames).
pub struct SecureWriter {
    stream: TcpStream,
    noise: Arc<StatelessTransportState>,
    nonce: u64,
    sealed: Vec<u8>,
}

impl SecureWriter {
    /// The socket under the link (to shut it down).
    pub fn socket(&self) -> &TcpStream {
        &self.stream
    }
}

impl Write for SecureWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let n = buf.len().min(FRAME_PLAINTEXT_MAX);
        let len = self
            .noise
            .write_message(self.nonce, &buf[..n], &mut self.sealed[2..])
            .map_err(|e| io::Error::other(format!("seal: {e}")))?;
        self.nonce += 1;
        self.sealed[..2].copy_from_slice(&(len as u16).to_be_bytes());
        self.stream.write_all(&self.sealed[..2 + len])?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, BufWriter};
    use std::net::TcpListener;

    fn secret(text: &str) -> LinkSecret {
        LinkSecret::from_bytes(text.as_bytes()).expect("a long enough secret")
    }

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        (client, server)
    }

    #[test]
    fn both_ends_with_the_secret_exchange_hello_answer_and_a_long_stream() {
        let (client, server) = pair();
        let shared = secret("correct horse battery staple");
        let theirs = shared.clone();
        let primary = std::thread::spawn(move || {
            let opened = open(&server, &theirs).expect("opens");
            assert_eq!(opened.hello, b"hello from the standby");
            let (reader, writer) = opened.answer(&server, b"OK").expect("answers");
            let mut out = BufWriter::with_capacity(FRAME_PLAINTEXT_MAX, writer);
            let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
            out.write_all(&big).expect("write");
            out.flush().expect("flush");
            let mut line = String::new();
            BufReader::new(reader).read_line(&mut line).expect("ack");
            line
        });
        let (answer, (mut reader, mut writer)) =
            connect(&client, &shared, b"hello from the standby").expect("connects");
        assert_eq!(answer, b"OK");
        let mut got = vec![0u8; 300_000];
        reader.read_exact(&mut got).expect("the stream");
        assert!(got.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        writer.write_all(b"ACK 7\n").expect("ack");
        assert_eq!(primary.join().expect("primary"), "ACK 7\n");
    }

    #[test]
    fn a_peer_without_the_secret_gets_no_byte_and_the_standby_refuses_such_a_primary() {
        let (mut client, server) = pair();
        let primary = std::thread::spawn(move || {
            let result = open(&server, &secret("the primary's own secret"));
            drop(server);
            result.err()
        });
        let _ = connect(&client, &secret("another secret entirely"), b"LADDER-REPL");
        let refusal = primary.join().expect("primary");
        assert!(refusal.is_some_and(|why| why.contains("does not open")));
        // The primary closed having sent nothing: the standby reads end of stream at once.
        let mut rest = Vec::new();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        assert_eq!(
            client
                .read_to_end(&mut rest)
                .map(|_| rest.len())
                .unwrap_or(0),
            0
        );

        // A plain-text handshake of the old protocol opens nothing either.
        let (mut plain, server) = pair();
        let primary =
            std::thread::spawn(move || open(&server, &secret("the primary's own secret")).err());
        plain
            .write_all(b"LADDER-REPL 2 FROM 1 AFTER -\n")
            .expect("write");
        assert!(primary.join().expect("primary").is_some());
        let mut rest = Vec::new();
        assert_eq!(
            plain
                .read_to_end(&mut rest)
                .map(|_| rest.len())
                .unwrap_or(0),
            0
        );
    }

    #[test]
    fn a_peer_that_sends_nothing_is_cut_off_at_the_handshake_deadline() {
        let (_client, server) = pair();
        let started = Instant::now();
        let error = open(&server, &secret("sixteen bytes at least")).err();
        assert!(error.is_some());
        assert!(started.elapsed() >= HANDSHAKE_TIMEOUT);
    }

    #[test]
    fn a_tampered_frame_fails_authentication() {
        let (client, server) = pair();
        let shared = secret("correct horse battery staple");
        let theirs = shared.clone();
        let primary = std::thread::spawn(move || {
            let opened = open(&server, &theirs).expect("opens");
            let (mut reader, _writer) = opened.answer(&server, b"OK").expect("answers");
            let mut buf = [0u8; 8];
            reader.read(&mut buf).map_err(|e| e.kind())
        });
        let (_, _link) = connect(&client, &shared, b"hi").expect("connects");
        // A frame sealed under another session's key, as an attacker on the path might send.
        (&client).write_all(&[0, 20]).expect("head");
        (&client).write_all(&[0x5a; 20]).expect("body");
        assert_eq!(
            primary.join().expect("primary"),
            Err(io::ErrorKind::InvalidData)
        );
    }

    #[test]
    fn a_first_message_opens_only_with_its_own_secret() {
        let shared = secret("correct horse battery staple");
        let message = first_message(&shared, b"LADDER-REPL hello").expect("sealed");
        let opened = open_frame(&shared, &message).expect("opens");
        assert_eq!(opened.hello, b"LADDER-REPL hello");
        assert!(open_frame(&secret("another secret, same length"), &message).is_err());
        assert!(open_frame(&LinkSecret::loopback_default(), &message).is_err());
        let mut flipped = message.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(open_frame(&shared, &flipped).is_err());
    }

    #[test]
    fn short_secrets_are_refused_and_whitespace_around_one_does_not_count() {
        assert!(LinkSecret::from_bytes(b"  short  \n").is_err());
        let a = secret("0123456789abcdef");
        let b = LinkSecret::from_bytes(b"\n 0123456789abcdef \n").expect("trimmed");
        assert_eq!(a.psk, b.psk);
        assert_ne!(a.psk, LinkSecret::loopback_default().psk);
        assert!(a.is_configured() && !LinkSecret::loopback_default().is_configured());
    }
}
