//! A TCP proxy in front of a browser that can cut one connection ([`CutProxy::cut`]): what makes
//! a supervisor reconnect to a real Chromium.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Forwards each connection to `upstream` as it is; [`CutProxy::cut`] closes one.
pub struct CutProxy {
    addr: SocketAddr,
    /// Both ends of every connection, in the order they were accepted.
    conns: Arc<Mutex<Vec<(TcpStream, TcpStream)>>>,
    stopping: Arc<AtomicBool>,
}

impl CutProxy {
    pub fn start(upstream: SocketAddr) -> CutProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().expect("the proxy's address");
        let conns: Arc<Mutex<Vec<(TcpStream, TcpStream)>>> = Arc::default();
        let stopping = Arc::new(AtomicBool::new(false));
        let (list, stop) = (Arc::clone(&conns), Arc::clone(&stopping));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(up) = TcpStream::connect(upstream) else {
                    continue;
                };
                let ends = (client.try_clone(), up.try_clone());
                let (Ok(c), Ok(u)) = ends else { continue };
                list.lock().unwrap().push((c, u));
                let (c2, u2) = match (client.try_clone(), up.try_clone()) {
                    (Ok(c2), Ok(u2)) => (c2, u2),
                    _ => continue,
                };
                std::thread::spawn(move || pump(client, up));
                std::thread::spawn(move || pump(u2, c2));
            }
        });
        CutProxy {
            addr,
            conns,
            stopping,
        }
    }

    /// A proxy in front of the browser at `ws_url` (`ws://IP:PORT/path`), and the URL that
    /// reaches the browser through it.
    pub fn in_front_of(ws_url: &str) -> (CutProxy, String) {
        let rest = ws_url.strip_prefix("ws://").expect("a ws:// DevTools URL");
        let (host_port, path) = rest.split_at(rest.find('/').expect("a path"));
        let upstream: SocketAddr = host_port.parse().expect("an IP address and port");
        let proxy = CutProxy::start(upstream);
        let url = format!("ws://{}{path}", proxy.addr);
        (proxy, url)
    }

    /// How many connections it has accepted.
    pub fn count(&self) -> usize {
        self.conns.lock().unwrap().len()
    }

    /// Closes connection `i` (0-based, in accept order) at both ends.
    pub fn cut(&self, i: usize) {
        let conns = self.conns.lock().unwrap();
        let (c, u) = &conns[i];
        let _ = c.shutdown(Shutdown::Both);
        let _ = u.shutdown(Shutdown::Both);
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::Release);
        let _ = TcpStream::connect(self.addr);
        for (c, u) in self.conns.lock().unwrap().iter() {
            let _ = c.shutdown(Shutdown::Both);
            let _ = u.shutdown(Shutdown::Both);
        }
    }
}

/// Copies `from` into `to` until either ends, then closes both.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let _ = io::copy(&mut from, &mut to);
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
