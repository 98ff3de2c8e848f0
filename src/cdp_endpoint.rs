//! **The task's CDP endpoint** (issue 30): any CDP client (Puppeteer, Playwright, a raw
//! WebSocket) connects to it as if it were the browser, and is carried over the task's one
//! upstream connection, where the supervisor sees every dialog first.
//!
//! One listener per registry ([`Listener`], started by the first
//! [`SupervisorRegistry::cdp_endpoint`], on `127.0.0.1:0` unless `CDP_SUPERVISOR_ENDPOINT_LISTEN`
//! names another loopback address). Each task has a path of its own carrying a random token of
//! 128 bits: `http://127.0.0.1:P/<token>` answers `/json/version` (and `/json/version/`, as
//! Playwright asks) and `/json/list` like Chromium, naming `ws://127.0.0.1:P/devtools/browser/
//! <token>`, where the WebSocket is. A request whose `Host` does not name this listener is
//! refused (DNS rebinding), and so is a WebSocket upgrade with an `Origin` (a web page; Chromium's
//! own `--remote-allow-origins` rule with nothing allowed).
//!
//! # Layout
//!
//! * here: the listener, its tasks and the public [`CdpEndpoint`];
//! * `http.rs`: one accepted connection: the request head (on `crate::http1`), the checks,
//!   discovery and the WebSocket upgrade;
//! * `client.rs`: one client's two threads (its reader, its writer);
//! * `mux.rs`: one task's clients on its upstream connection (ids, sessions, the dialog rule),
//!   the [`Tap`](crate::tap::Tap) its reader feeds;
//! * `outlet.rs`: what waits for one client, bounded in bytes and time, and who writes it;
//! * `frame.rs`: the server side of the WebSocket framing.
//!
//! Threads are named after the listener's port (a test finds its own): `cdp-ep-P` accepts,
//! `cdp-in-P` serves one connection (and reads a client's frames), `cdp-out-P` writes to one
//! client.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;

use log::{debug, warn};
use rustc_hash::FxHashMap;

use crate::error::Error;
use crate::registry::SupervisorRegistry;
use crate::supervisor::Supervisor;

mod client;
mod frame;
mod http;
mod mux;
mod outlet;
mod wire;

/// Connections being served at once (discovery and clients); more are closed at once.
const MAX_CONNECTIONS: usize = 256;

/// Where a task's CDP clients connect.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CdpEndpoint {
    /// The `ws://` URL a client connects to as to a browser (Puppeteer's `browserWSEndpoint`).
    pub ws_url: String,
    /// The `http://` base whose `/json/version` names `ws_url` (Puppeteer's `browserURL`,
    /// Playwright's `connectOverCDP`).
    pub http_url: String,
}

/// A task the listener serves.
#[derive(Debug)]
struct Entry {
    task_id: String,
    sup: Weak<Supervisor>,
}

/// The registry's one listener.
#[derive(Debug)]
pub(crate) struct Listener {
    addr: SocketAddr,
    /// Token -> task.
    tasks: Mutex<FxHashMap<String, Entry>>,
    closed: AtomicBool,
    connections: AtomicUsize,
    accept: Mutex<Option<JoinHandle<()>>>,
    /// The threads serving connections (joined on close).
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Listener {
    fn bind(addr: &str) -> Result<Arc<Listener>, Error> {
        let socket = TcpListener::bind(addr).map_err(|e| {
            Error::InvalidConfig(format!("the CDP endpoint cannot listen on {addr}: {e}"))
        })?;
        let addr = socket.local_addr().map_err(|e| Error::Io(e.to_string()))?;
        let me = Arc::new(Listener {
            addr,
            tasks: Mutex::new(FxHashMap::default()),
            closed: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            accept: Mutex::new(None),
            threads: Mutex::new(Vec::new()),
        });
        let weak = Arc::downgrade(&me);
        let handle = std::thread::Builder::new()
            .name(format!("cdp-ep-{}", addr.port()))
            .spawn(move || accept_loop(&weak, &socket))
            .map_err(|e| Error::Io(format!("cannot start the CDP endpoint's thread: {e}")))?;
        *lock(&me.accept) = Some(handle);
        Ok(me)
    }

    /// The endpoint of `sup`'s task (the same token for the task's whole life in the registry).
    fn endpoint_for(&self, sup: &Arc<Supervisor>) -> Result<CdpEndpoint, Error> {
        let mut tasks = lock(&self.tasks);
        let found = tasks
            .iter()
            .find(|(_, e)| e.task_id == sup.task_id())
            .map(|(t, _)| t.clone());
        let token = match found {
            Some(t) => t,
            None => crate::task_id::random_hex(16).map_err(Error::Io)?,
        };
        tasks.insert(
            token.clone(),
            Entry {
                task_id: sup.task_id().to_string(),
                sup: Arc::downgrade(sup),
            },
        );
        Ok(self.urls(&token))
    }

    fn urls(&self, token: &str) -> CdpEndpoint {
        let host = self.host();
        CdpEndpoint {
            ws_url: format!("ws://{host}/devtools/browser/{token}"),
            http_url: format!("http://{host}/{token}"),
        }
    }

    /// `ip:port` as URLs spell it.
    fn host(&self) -> String {
        match self.addr {
            SocketAddr::V4(a) => a.to_string(),
            SocketAddr::V6(a) => format!("[{}]:{}", a.ip(), a.port()),
        }
    }

    /// The live supervisor behind `token`, looked at in constant time per entry.
    fn supervisor(&self, token: &str) -> Option<Arc<Supervisor>> {
        let tasks = lock(&self.tasks);
        let mut found = None;
        for (t, e) in tasks.iter() {
            if same_token(t.as_bytes(), token.as_bytes()) {
                found = e.sup.upgrade();
            }
        }
        found
    }
}

impl crate::tap::Listener for Listener {
    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }

    /// Stops accepting, disconnects every client and joins every thread.
    fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        // Wake the accept loop (it checks `closed` after each accept).
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = lock(&self.accept).take() {
            let _ = h.join();
        }
        let sups: Vec<Arc<Supervisor>> = lock(&self.tasks)
            .drain()
            .filter_map(|(_, e)| e.sup.upgrade())
            .collect();
        for sup in sups {
            if let Some(m) = client::mux_of(&sup) {
                m.close_all(1001, "the CDP endpoint closed");
            }
        }
        let threads = std::mem::take(&mut *lock(&self.threads));
        for t in threads {
            let _ = t.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether two tokens are equal, looking at every byte of the longer.
fn same_token(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().max(b.len());
    let diff = (0..n).fold((a.len() != b.len()) as u8, |acc, i| {
        acc | (a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0))
    });
    std::hint::black_box(diff) == 0
}

fn accept_loop(me: &Weak<Listener>, socket: &TcpListener) {
    loop {
        let accepted = socket.accept();
        let Some(listener) = me.upgrade() else { return };
        if listener.closed.load(Ordering::Acquire) {
            return;
        }
        let (stream, peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                warn!("CDP endpoint: accept failed: {e}");
                continue;
            }
        };
        if listener.connections.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            listener.connections.fetch_sub(1, Ordering::AcqRel);
            debug!("CDP endpoint: {peer} refused, {MAX_CONNECTIONS} connections already");
            continue;
        }
        let l = Arc::clone(&listener);
        let spawned = std::thread::Builder::new()
            .name(format!("cdp-in-{}", listener.addr.port()))
            .stack_size(256 * 1024)
            .spawn(move || {
                http::serve(&l, stream, peer);
                l.connections.fetch_sub(1, Ordering::AcqRel);
            });
        match spawned {
            Ok(h) => {
                let mut threads = lock(&listener.threads);
                threads.retain(|t| !t.is_finished());
                threads.push(h);
            }
            Err(e) => {
                listener.connections.fetch_sub(1, Ordering::AcqRel);
                warn!("CDP endpoint: cannot serve {peer}: {e}");
            }
        }
    }
}

impl SupervisorRegistry {
    /// The CDP endpoint of `task_id`, whose supervisor must be running: any CDP client connects
    /// to its `ws_url` (or discovers it from `http_url`) as to the browser, and is carried over
    /// the task's one connection (module `cdp_endpoint`). The registry's listener starts on the
    /// first call. The URLs carry a secret token: treat them like a password.
    pub fn cdp_endpoint(&self, task_id: &str) -> Result<CdpEndpoint, Error> {
        let sup = self
            .get(task_id)
            .ok_or_else(|| Error::NotActive(task_id.to_string()))?;
        let started = match self.endpoint.get() {
            Some(l) => Arc::clone(l),
            None => {
                let addr = std::env::var("CDP_SUPERVISOR_ENDPOINT_LISTEN")
                    .unwrap_or_else(|_| "127.0.0.1:0".into());
                let mine: Arc<dyn crate::tap::Listener> = Listener::bind(&addr)?;
                let l = Arc::clone(self.endpoint.get_or_init(|| Arc::clone(&mine)));
                if !Arc::ptr_eq(&l, &mine) {
                    mine.close(); // another caller's came first
                }
                l
            }
        };
        let listener = started
            .into_any()
            .downcast::<Listener>()
            .map_err(|_| Error::Io("the CDP endpoint is not this crate's".into()))?;
        listener.endpoint_for(&sup)
    }
}
