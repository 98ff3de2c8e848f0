//! **The task's CDP endpoint** (issue 30): any CDP client (Puppeteer, Playwright, a raw
//! WebSocket) connects to it as if it were the browser, and is carried over the task's one
//! upstream connection, where the supervisor sees every dialog first.
//!
//! One listener per registry ([`Listener`], started by the first
//! [`SupervisorRegistry::cdp_endpoint`] or [`SupervisorRegistry::cdp_proxy`], where `[endpoint]
//! listen` says: `127.0.0.1:0` unless configured, loopback only). Each task has a path of its
//! own carrying a random token of 128 bits (SPEC §18): `http://HOST:PORT/<token>` answers
//! `/json/version` (and `/json/version/`, as Playwright asks), `/json/list` and `/json` like
//! Chromium, naming `ws://HOST:PORT/<token>/devtools/browser/<id>`, where the WebSocket is. A
//! request whose `Host` does not name this listener is refused (DNS rebinding), and so is a
//! WebSocket upgrade with an `Origin` (a web page) that `[endpoint] allowed_origins` does not
//! list (Chromium's own `--remote-allow-origins` rule).
//!
//! # Layout
//!
//! * here: the listener, its tasks and the public [`CdpEndpoint`];
//! * `http.rs`: one accepted connection: the request head (on `crate::http1`), the checks,
//!   discovery and the WebSocket upgrade;
//! * `proxy.rs`: [`SupervisorRegistry::cdp_proxy`], a path whose every client becomes a task
//!   of its own (`cdp-supervisor proxy`);
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

use crate::config::EndpointSettings;
use crate::error::Error;
use crate::registry::SupervisorRegistry;
use crate::supervisor::Supervisor;

mod client;
mod frame;
mod http;
mod mux;
mod outlet;
mod proxy;
mod wire;

pub use proxy::{CdpProxy, ProxyEvent};

/// Connections being served at once (discovery and clients); more are closed at once.
const MAX_CONNECTIONS: usize = 256;

/// Where a task's CDP clients connect.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CdpEndpoint {
    /// The `ws://` URL a client connects to as to a browser (Puppeteer's `browserWSEndpoint`):
    /// `ws://HOST:PORT/<token>/devtools/browser/<id>`.
    pub ws_url: String,
    /// The `http://` base whose `/json/version` names `ws_url` (Puppeteer's `browserURL`,
    /// Playwright's `connectOverCDP`): `http://HOST:PORT/<token>`.
    pub http_url: String,
}

/// What a token leads to.
#[derive(Debug, Clone)]
enum Serves {
    /// One task's clients.
    Task {
        task_id: String,
        sup: Weak<Supervisor>,
    },
    /// A proxy: each client a task of its own.
    Proxy(Weak<proxy::Proxy>),
}

/// A path the listener serves.
#[derive(Debug)]
struct Entry {
    /// The `<id>` of its `/devtools/browser/<id>` (UUID-shaped, as Chromium's).
    browser_id: String,
    serves: Serves,
}

impl Entry {
    fn alive(&self) -> bool {
        match &self.serves {
            Serves::Task { sup, .. } => sup.strong_count() > 0,
            Serves::Proxy(p) => p.strong_count() > 0,
        }
    }
}

/// What a request's token found.
pub(super) enum Found {
    Task(Arc<Supervisor>),
    Proxy(Arc<proxy::Proxy>),
}

/// The registry's one listener.
#[derive(Debug)]
pub(crate) struct Listener {
    addr: SocketAddr,
    /// `[endpoint]` as the registry was configured.
    settings: EndpointSettings,
    /// Token -> what it serves.
    tasks: Mutex<FxHashMap<String, Entry>>,
    closed: AtomicBool,
    connections: AtomicUsize,
    accept: Mutex<Option<JoinHandle<()>>>,
    /// The threads serving connections (joined on close).
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// A fresh secret (128 random bits, hex).
fn secret() -> Result<String, Error> {
    crate::task_id::random_hex(16).map_err(Error::Io)
}

/// A fresh browser id, shaped as Chromium's (a UUID).
fn browser_id() -> Result<String, Error> {
    let h = secret()?;
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}

impl Listener {
    fn bind(settings: &EndpointSettings) -> Result<Arc<Listener>, Error> {
        let addr = &settings.listen;
        let socket = TcpListener::bind(addr).map_err(|e| {
            Error::InvalidConfig(format!(
                "the CDP endpoint cannot listen on {addr} (endpoint.listen): {e}"
            ))
        })?;
        let addr = socket.local_addr().map_err(|e| Error::Io(e.to_string()))?;
        let me = Arc::new(Listener {
            addr,
            settings: settings.clone(),
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
        tasks.retain(|_, e| e.alive());
        let found = tasks.iter().find(|(_, e)| match &e.serves {
            Serves::Task { task_id, sup: s } => {
                task_id == sup.task_id() && std::ptr::eq(s.as_ptr(), Arc::as_ptr(sup))
            }
            Serves::Proxy(_) => false,
        });
        if let Some((token, e)) = found {
            return Ok(self.urls(token, &e.browser_id));
        }
        let (token, id) = (secret()?, browser_id()?);
        let serves = Serves::Task {
            task_id: sup.task_id().to_string(),
            sup: Arc::downgrade(sup),
        };
        let urls = self.urls(&token, &id);
        tasks.insert(
            token,
            Entry {
                browser_id: id,
                serves,
            },
        );
        Ok(urls)
    }

    /// A new path for `proxy`: its token and its URLs.
    fn add_proxy(&self, proxy: &Arc<proxy::Proxy>) -> Result<(String, CdpEndpoint), Error> {
        let (token, id) = (secret()?, browser_id()?);
        let urls = self.urls(&token, &id);
        let entry = Entry {
            browser_id: id,
            serves: Serves::Proxy(Arc::downgrade(proxy)),
        };
        let mut tasks = lock(&self.tasks);
        tasks.retain(|_, e| e.alive());
        tasks.insert(token.clone(), entry);
        Ok((token, urls))
    }

    /// Forgets the path of `token`.
    fn remove(&self, token: &str) {
        lock(&self.tasks).remove(token);
    }

    fn urls(&self, token: &str, browser_id: &str) -> CdpEndpoint {
        let host = self.host();
        CdpEndpoint {
            ws_url: format!("ws://{host}/{token}/devtools/browser/{browser_id}"),
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

    /// What `token` serves while it lives, and its browser id; every entry is compared in
    /// constant time.
    fn find(&self, token: &str) -> Option<(Found, String)> {
        let tasks = lock(&self.tasks);
        let mut found = None;
        for (t, e) in tasks.iter() {
            if same_token(t.as_bytes(), token.as_bytes()) {
                found = Some((e.serves.clone(), e.browser_id.clone()));
            }
        }
        drop(tasks);
        let (serves, id) = found?;
        let found = match serves {
            Serves::Task { sup, .. } => Found::Task(sup.upgrade()?),
            Serves::Proxy(p) => Found::Proxy(p.upgrade()?),
        };
        Some((found, id))
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
            .filter_map(|(_, e)| match e.serves {
                Serves::Task { sup, .. } => sup.upgrade(),
                Serves::Proxy(_) => None,
            })
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
    /// The CDP endpoint of `task_id`, whose supervisor must be running ([`Error::NotActive`]
    /// otherwise): any CDP client connects to its `ws_url` (or discovers it from `http_url`) as
    /// to the browser, and is carried over the task's one connection (module `cdp_endpoint`).
    /// The registry's listener starts on the first call, where `[endpoint] listen` says. The
    /// URLs carry a secret token: treat them like a password.
    pub fn cdp_endpoint(&self, task_id: &str) -> Result<CdpEndpoint, Error> {
        let sup = self
            .get(task_id)
            .filter(|s| s.is_alive())
            .ok_or_else(|| Error::NotActive(task_id.to_string()))?;
        self.endpoint_listener()?.endpoint_for(&sup)
    }

    /// The registry's listener, started on the first call.
    fn endpoint_listener(&self) -> Result<Arc<Listener>, Error> {
        let started = match self.endpoint.get() {
            Some(l) => Arc::clone(l),
            None => {
                let mine: Arc<dyn crate::tap::Listener> = Listener::bind(self.config().endpoint())?;
                let l = Arc::clone(self.endpoint.get_or_init(|| Arc::clone(&mine)));
                if !Arc::ptr_eq(&l, &mine) {
                    mine.close(); // another caller's came first
                }
                l
            }
        };
        started
            .into_any()
            .downcast::<Listener>()
            .map_err(|_| Error::Io("the CDP endpoint is not this crate's".into()))
    }
}
