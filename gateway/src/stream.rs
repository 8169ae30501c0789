//! A client's byte stream: plain TCP, or TLS (rustls) over TCP when a certificate is
//! configured. Both are non-blocking; the event loop treats `WouldBlock` the same way.

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

/// A connection's stream.
pub enum Stream {
    /// Plain HTTP.
    Plain(TcpStream),
    /// HTTPS.
    Tls(Box<StreamOwned<ServerConnection, TcpStream>>),
}

impl Stream {
    /// Whether this is plain HTTP (no TLS).
    pub fn is_plain(&self) -> bool {
        matches!(self, Stream::Plain(_))
    }

    /// A stream over an accepted socket, TLS when `tls` is given.
    pub fn new(socket: TcpStream, tls: Option<&Arc<ServerConfig>>) -> io::Result<Stream> {
        match tls {
            None => Ok(Stream::Plain(socket)),
            Some(config) => {
                let connection = ServerConnection::new(config.clone()).map_err(io::Error::other)?;
                Ok(Stream::Tls(Box::new(StreamOwned::new(connection, socket))))
            }
        }
    }

    /// Whether TLS records the library holds wait for the socket (never for plain HTTP).
    pub fn has_pending_output(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(s) => s.conn.wants_write(),
        }
    }

    /// The socket, for registration with the poller.
    pub fn socket(&mut self) -> &mut TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => &mut s.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => {
                while s.conn.wants_write() {
                    s.conn.write_tls(&mut s.sock)?;
                }
                Ok(())
            }
        }
    }
}

/// The TLS configuration of a PEM certificate chain and private key.
pub fn tls_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!("--tls-cert {}: no certificate", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("--tls-key {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("TLS certificate and key: {e}"))?;
    Ok(Arc::new(config))
}
