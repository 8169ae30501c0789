//! The replication handshake on arbitrary bytes: `secure::open_frame` (what the primary does
//! with a peer's first message, before anything is sent back) and `Hello::parse` (what an
//! opened message must hold).
//!
//! Besides never panicking: bytes from a peer open only when sealed with the secret; any
//! hello a standby with the secret sends opens to exactly those bytes; and a hello that
//! parses writes out a line that parses to the same hello.

use ladder_sequencer::replication::secure::{first_message, open_frame, FRAME_PLAINTEXT_MAX};
use ladder_sequencer::replication::{Hello, LinkSecret};

/// Room the handshake message needs beside its payload (an ephemeral key and a tag).
const HANDSHAKE_OVERHEAD_BYTES: usize = 64;

/// Checks one input.
pub fn check(data: &[u8]) {
    let secret = LinkSecret::from_bytes(b"the fuzz target's replication secret").expect("secret");

    // As a first message from a peer: opening never panics, and what opens reads as a hello
    // or is refused.
    if let Ok(opened) = open_frame(&secret, data) {
        if let Ok(text) = std::str::from_utf8(&opened.hello) {
            let _ = Hello::parse(text);
        }
    }

    // As the hello of a standby that holds the secret: sealed, it opens to the same bytes.
    if data.len() <= FRAME_PLAINTEXT_MAX - HANDSHAKE_OVERHEAD_BYTES {
        let message = first_message(&secret, data).expect("a hello within a frame seals");
        let opened = open_frame(&secret, &message).expect("a sealed hello opens");
        assert_eq!(opened.hello, data);
    }

    // As a hello line: one that parses writes out the same hello.
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(hello) = Hello::parse(text) {
            assert_eq!(Hello::parse(&hello.line()), Ok(hello.clone()), "{text:?}");
        }
    }
}
