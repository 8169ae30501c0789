//! HTTPS: with `--tls-cert` and `--tls-key` the service is reached over TLS (rustls).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, ServerName};
use support::Service;

/// A self-signed certificate for `localhost`, written as PEM into `dir`: it and the paths of
/// the certificate and the key.
fn self_signed(
    dir: &std::path::Path,
) -> (
    rcgen::CertifiedKey<rcgen::KeyPair>,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert_path = dir.join("cert.pem");
    let key_path = dir.join("key.pem");
    std::fs::write(&cert_path, certified.cert.pem()).unwrap();
    std::fs::write(&key_path, certified.signing_key.serialize_pem()).unwrap();
    (certified, cert_path, key_path)
}

#[test]
fn the_service_answers_over_https_with_the_configured_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (certified, cert_path, key_path) = self_signed(dir.path());
    let service = Service::start(&[
        "--tls-cert",
        cert_path.to_str().unwrap(),
        "--tls-key",
        key_path.to_str().unwrap(),
    ]);
    assert!(service.url.starts_with("https://"), "{}", service.url);

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(certified.cert.der().to_vec()))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connection =
        rustls::ClientConnection::new(Arc::new(config), ServerName::try_from("localhost").unwrap())
            .unwrap();
    let socket = TcpStream::connect(service.url.trim_start_matches("https://")).unwrap();
    socket
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut tls = rustls::StreamOwned::new(connection, socket);
    tls.write_all(b"GET /markets HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => response.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(text.contains("\"next_cursor\":\"LTE=\""), "{text}");
}

#[test]
fn a_tls_handshake_that_stalls_is_cut_after_10_s() {
    let dir = tempfile::tempdir().unwrap();
    let (_, cert_path, key_path) = self_signed(dir.path());
    let service = Service::start(&[
        "--tls-cert",
        cert_path.to_str().unwrap(),
        "--tls-key",
        key_path.to_str().unwrap(),
    ]);
    // The first bytes of a ClientHello record, then nothing.
    let mut stalled = TcpStream::connect(service.url.trim_start_matches("https://")).unwrap();
    stalled.write_all(&[0x16, 0x03, 0x01]).unwrap();
    stalled
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let _ = stalled.read_to_end(&mut rest);
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_secs(9) && waited < std::time::Duration::from_secs(13),
        "{waited:?}"
    );
}

/// A standby serves its client listener over TLS with the same flags as `serve`.
#[test]
fn a_standby_answers_over_https_with_the_configured_certificate() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let (certified, cert_path, key_path) = self_signed(dir.path());
    let replication = support::free_port();
    let _primary = Service::start(&["--replication-listen", &format!("127.0.0.1:{replication}")]);
    let mut standby = support::standby_command(replication, &dir.path().join("standby"))
        .args(["--tls-cert", cert_path.to_str().unwrap()])
        .args(["--tls-key", key_path.to_str().unwrap()])
        .spawn()
        .unwrap();
    let stdout = standby.stdout.take().unwrap();
    let url = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| {
            line.strip_prefix("ladder: listening on ")
                .map(str::to_string)
        })
        .expect("the standby's address");
    assert!(url.starts_with("https://"), "{url}");

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(certified.cert.der().to_vec()))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let text = loop {
        let connection = rustls::ClientConnection::new(
            config.clone(),
            ServerName::try_from("localhost").unwrap(),
        )
        .unwrap();
        let socket = TcpStream::connect(url.trim_start_matches("https://")).unwrap();
        socket
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut tls = rustls::StreamOwned::new(connection, socket);
        let _ =
            tls.write_all(b"GET /time HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        let mut response = Vec::new();
        let _ = tls.read_to_end(&mut response);
        let text = String::from_utf8_lossy(&response).to_string();
        if text.starts_with("HTTP/1.1 200") || std::time::Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let _ = standby.kill();
    let _ = standby.wait();
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
}

#[test]
fn the_admin_commands_say_so_when_the_node_speaks_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (_certified, cert_path, key_path) = self_signed(dir.path());
    let service = Service::start(&[
        "--tls-cert",
        cert_path.to_str().unwrap(),
        "--tls-key",
        key_path.to_str().unwrap(),
    ]);
    let address = service.url.trim_start_matches("https://").to_string();
    for command in ["snapshot", "promote"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ladder"))
            .args([command, "--listen", &address, "--admin-token"])
            .arg(support::ADMIN_TOKEN)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {stderr}");
        assert!(
            stderr.contains("answered in TLS") && stderr.lines().count() == 1,
            "{command}: {stderr}"
        );
    }
}
