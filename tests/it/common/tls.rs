//! A TLS peer for `wss://` tests: a private CA with a certificate for 127.0.0.1/localhost
//! ([`pki`]), and a proxy that terminates TLS with it and relays to a plain upstream (the fake
//! browser) ([`TlsProxy`]). Also compiled into `tests/solo` (by `#[path]`), so it uses nothing
//! else from `common`.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A CA and a server certificate for 127.0.0.1/localhost signed by it.
pub struct Pki {
    /// The CA's certificate (PEM), what `browser.ca_file` names.
    pub ca_pem: String,
    server_cert: CertificateDer<'static>,
    server_key: PrivateKeyDer<'static>,
}

/// A fresh CA and a server certificate signed by it.
pub fn pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        server_cert: leaf.der().clone(),
        server_key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    }
}

/// Terminates TLS on 127.0.0.1 and relays bytes to `upstream` (the plain fake browser). Its
/// threads end with their connections, and the accept thread with the test process.
pub struct TlsProxy {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
}

impl TlsProxy {
    /// Listens on 127.0.0.1 and relays every connection to `127.0.0.1:upstream`.
    pub fn start(pki: &Pki, upstream: u16) -> TlsProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = Arc::new(
            rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![pki.server_cert.clone()], pki.server_key.clone_key())
                .unwrap(),
        );
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { return };
                let config = Arc::clone(&config);
                std::thread::spawn(move || relay(client, config, upstream));
            }
        });
        TlsProxy { port }
    }
}

fn relay(client: TcpStream, config: Arc<rustls::ServerConfig>, upstream: u16) {
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let raw = client.try_clone().unwrap();
    let mut tls = rustls::StreamOwned::new(conn, client);
    while tls.conn.is_handshaking() {
        if tls.conn.complete_io(&mut tls.sock).is_err() {
            return; // e.g. the client refused our certificate
        }
    }
    let Ok(up) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    let tls = Arc::new(Mutex::new(tls));
    // upstream -> client: write under the lock.
    let (tls_w, mut up_r, raw_w) = (
        Arc::clone(&tls),
        up.try_clone().unwrap(),
        raw.try_clone().unwrap(),
    );
    std::thread::spawn(move || {
        let mut buf = [0u8; 16384];
        loop {
            match up_r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let mut t = tls_w.lock().unwrap();
                    if t.write_all(&buf[..n]).and_then(|_| t.flush()).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = raw_w.shutdown(Shutdown::Both);
    });
    // client -> upstream: drain non-blocking under the lock (rustls may already hold plaintext
    // that arrived with the handshake), then wait for more bytes without the lock.
    let mut up_w = up;
    let mut byte = [0u8; 1];
    let mut buf = [0u8; 16384];
    loop {
        let mut data = Vec::new();
        {
            let mut t = tls.lock().unwrap();
            raw.set_nonblocking(true).unwrap();
            let r = loop {
                match t.read(&mut buf) {
                    Ok(0) => break Err(()),
                    Ok(n) => data.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(()),
                    Err(_) => break Err(()),
                }
            };
            raw.set_nonblocking(false).unwrap();
            if r.is_err() && data.is_empty() {
                break;
            }
        }
        if up_w.write_all(&data).is_err() {
            break;
        }
        if !matches!(raw.peek(&mut byte), Ok(n) if n > 0) {
            break;
        }
    }
    let _ = up_w.shutdown(Shutdown::Both);
}
