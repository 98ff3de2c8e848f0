//! The `cdp-supervisor` command-line tool: `demo`, `watch`, `mcp`, `proxy`, `check` (SPEC §15).

mod demo;
mod http;
mod proxy;

use cdp_supervisor::unversioned::sync;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cdp_supervisor::unversioned::probe;
use cdp_supervisor::unversioned::{LaunchedBrowser, find_browser};
use cdp_supervisor::{Config, SupervisorRegistry, redact_url};
use clap::{Parser, Subcommand};
use crossbeam_channel::{Receiver, Sender, bounded};

/// Set by the signal handler (SIGINT, SIGTERM, SIGHUP) before it cleans up: whatever fails after this is the stop itself.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// True once Ctrl-C was pressed.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

#[derive(Parser, Debug)]
#[command(
    name = "cdp-supervisor",
    version,
    about = "Persistent CDP supervision: native dialogs, frames, routing"
)]
struct Cli {
    /// Configuration file layered over config/default.toml (also $CDP_SUPERVISOR_CONFIG).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Launch headless Chromium, serve a page with dialogs and a cross-site iframe, and narrate
    /// what the supervisor sees and does. Falls back to the built-in fake browser without Chromium.
    Demo,
    /// Print JSON lines of state changes until Ctrl-C.
    Watch {
        /// CDP endpoint (ws://, wss://, http://host:port); default: config, else launch Chromium.
        #[arg(long)]
        cdp_url: Option<String>,
        /// Also serve the live supervisor page at http://ADDR/ (no /mcp endpoint), with the
        /// same Host/Origin/token rules as `mcp --http` (CDP_SUPERVISOR_MCP_TOKEN).
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = cdp_supervisor::mcp::http::DEFAULT_ADDR)]
        http: Option<String>,
    },
    /// Model Context Protocol server: on stdio (JSON-RPC 2.0, one message per line), or with
    /// --http over Streamable HTTP at http://ADDR/mcp (and the live supervisor page at
    /// http://ADDR/).
    Mcp {
        /// Serve MCP over Streamable HTTP at http://ADDR/mcp instead of stdio. ADDR: HOST:PORT,
        /// [IPV6]:PORT, HOST or PORT; without a value 127.0.0.1:8737. The Host header must name
        /// the server (or an entry of mcp.allowed_hosts). With CDP_SUPERVISOR_MCP_TOKEN set
        /// (environment only), every request needs Authorization: Bearer <token>; an address
        /// other than loopback needs it.
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = cdp_supervisor::mcp::http::DEFAULT_ADDR)]
        http: Option<String>,
    },
    /// Serve a browser to CDP clients (Puppeteer, Playwright, a raw WebSocket) through the
    /// supervisor: every client that connects to the printed ws:// URL (or discovers it at the
    /// http:// base) becomes a task of its own (client-N) on a new page, stopped when it leaves.
    /// JSON lines on stdout: listening, task_started, dialog_opened, dialog_closed, task_stopped.
    Proxy {
        /// CDP endpoint (ws://, wss://, http://host:port); default: config, else launch Chromium.
        #[arg(long)]
        cdp_url: Option<String>,
        /// Where clients connect: a loopback HOST:PORT (default: [endpoint] listen, else
        /// 127.0.0.1:0, any free port).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        /// Also serve the live supervisor page at http://ADDR/ (no /mcp endpoint), as `watch
        /// --http` does.
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = cdp_supervisor::mcp::http::DEFAULT_ADDR)]
        http: Option<String>,
    },
    /// Exit 0 when a CDP endpoint answers at URL within 5 s, else 1 with the reason on stderr.
    /// Connects as `watch` would (the configuration's `browser.ca_file` included).
    Check {
        /// ws://, wss:// or http://host:port
        url: String,
    },
}

/// What a signal (or the end of a command) must clean up: a launch in progress, supervisors,
/// then the browser we launched. Shared by every subcommand, so `demo`, `watch` and `mcp` stop
/// the same way on SIGTERM, SIGHUP and SIGINT.
pub struct Cleanup {
    registry: Mutex<Option<Arc<SupervisorRegistry>>>,
    browser: Mutex<Option<LaunchedBrowser>>,
    /// What to shut down before the supervisors are stopped (the proxy, which tells its clients
    /// why they are closed before their tasks end).
    first: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
    /// Anything else to shut down (the MCP server and the browser it launched).
    extra: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
    /// Dropped by [`Cleanup::run`]: a launch waiting for the browser's DevTools URL gives up
    /// and removes what it started.
    cancel_launch: Mutex<Option<Sender<()>>>,
    /// What launches wait on (disconnects when `cancel_launch` is dropped).
    launch_cancelled: Receiver<()>,
    /// Held by a launch until its browser is registered (or closed): `run` waits for it, so a
    /// signal during a launch cannot exit before that browser is cleaned up.
    launching: Mutex<()>,
    /// Held for the whole of [`Cleanup::run`]: a second caller (the signal handler while the
    /// main thread cleans up, or the other way round) waits for the first to finish instead of
    /// exiting under it with the browser half closed.
    running: Mutex<()>,
}

impl Default for Cleanup {
    fn default() -> Self {
        let (tx, rx) = bounded(0);
        Cleanup {
            registry: Mutex::default(),
            browser: Mutex::default(),
            first: Mutex::default(),
            extra: Mutex::default(),
            cancel_launch: Mutex::new(Some(tx)),
            launch_cancelled: rx,
            launching: Mutex::new(()),
            running: Mutex::new(()),
        }
    }
}

impl Cleanup {
    /// Cancels a launch in progress, stops every supervisor and closes the launched browser
    /// (gracefully: SIGTERM to its process group, SIGKILL after 1 s; its profile removed).
    /// Idempotent; concurrent callers return when the cleanup is complete.
    pub fn run(&self) {
        let _running = sync::lock(&self.running);
        drop(sync::lock(&self.cancel_launch).take());
        // A cancelled launch closes its browser itself; wait until it has.
        drop(sync::lock(&self.launching));
        let first: Vec<_> = sync::lock(&self.first).drain(..).collect();
        for f in first {
            f();
        }
        if let Some(r) = sync::lock(&self.registry).take() {
            r.stop_all();
        }
        let extra: Vec<_> = sync::lock(&self.extra).drain(..).collect();
        for f in extra {
            f();
        }
        drop(sync::lock(&self.browser).take());
    }
    /// Registers something else to shut down on Ctrl-C.
    pub fn on_cleanup(&self, f: impl FnOnce() + Send + 'static) {
        sync::lock(&self.extra).push(Box::new(f));
    }
    /// Registers something to shut down on Ctrl-C before the supervisors are stopped.
    pub fn on_cleanup_first(&self, f: impl FnOnce() + Send + 'static) {
        sync::lock(&self.first).push(Box::new(f));
    }
    /// Registers the registry to stop on Ctrl-C.
    pub fn set_registry(&self, r: Arc<SupervisorRegistry>) {
        *sync::lock(&self.registry) = Some(r);
    }
    /// Registers the browser to kill on Ctrl-C.
    pub fn set_browser(&self, b: LaunchedBrowser) {
        *sync::lock(&self.browser) = Some(b);
    }
    /// The launched browser's pid and what disconnects when it exits, if one was launched.
    pub fn browser_exit(&self) -> Option<(u32, Receiver<()>)> {
        sync::lock(&self.browser)
            .as_ref()
            .map(|b| (b.pid(), b.exit_signal()))
    }
    /// The launched browser's WebSocket URL, if any.
    pub fn browser_ws(&self) -> Option<String> {
        sync::lock(&self.browser)
            .as_ref()
            .map(|b| b.ws_url().to_string())
    }
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .target(env_logger::Target::Stderr)
        .init();
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let cleanup = Arc::new(Cleanup::default());
    {
        let cleanup = Arc::clone(&cleanup);
        let handler = ctrlc::set_handler(move || {
            INTERRUPTED.store(true, Ordering::SeqCst);
            // SIGINT, SIGTERM and SIGHUP alike (ctrlc's "termination" feature).
            eprintln!("\ninterrupted: stopping supervisors and the browser");
            cleanup.run();
            std::process::exit(0);
        });
        if let Err(e) = handler {
            eprintln!("warning: cannot install the Ctrl-C handler: {e}");
        }
    }
    if matches!(
        cli.command,
        Cmd::Demo | Cmd::Watch { .. } | Cmd::Mcp { .. } | Cmd::Proxy { .. }
    ) {
        // Profiles left by a browser-launching run that was killed outright (SIGKILL, a crash).
        cdp_supervisor::unversioned::remove_stale_profiles_once();
    }
    let result = match cli.command {
        Cmd::Demo => demo::run(config, &cleanup),
        Cmd::Watch { cdp_url, http } => watch(config, cdp_url, http.as_deref(), &cleanup),
        Cmd::Mcp { http: Some(addr) } => mcp_http(config, &addr, &cleanup),
        Cmd::Proxy {
            cdp_url,
            listen,
            http,
        } => proxy::run(config, cdp_url, listen, http.as_deref(), &cleanup),
        Cmd::Mcp { http: None } => {
            let server = Arc::new(cdp_supervisor::mcp::McpServer::new(config));
            {
                let server = Arc::clone(&server);
                cleanup.on_cleanup(move || server.shutdown());
            }
            let stdin = std::io::stdin().lock();
            let r = server
                .run(stdin, std::io::stdout())
                .map_err(|e| format!("stdio: {e}"));
            server.shutdown();
            r
        }
        Cmd::Check { url } => match probe(&url, &config) {
            Ok(()) => {
                println!("ok: a CDP endpoint answers at {}", redact_url(&url));
                Ok(())
            }
            // The error's text is redacted already (its URL and any lower layer's words).
            Err(e) => Err(format!(
                "no CDP endpoint answers at {}: {e}",
                redact_url(&url)
            )),
        },
    };
    cleanup.run();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // Ctrl-C: the stop is what made the command end; the handler exits 0 too.
        Err(_) if interrupted() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `mcp --http ADDR`: serves until a signal (whose handler shuts the server down and exits).
fn mcp_http(config: Config, addr: &str, cleanup: &Cleanup) -> Result<(), String> {
    let (server, with_token) = serve_http(config, addr, true, cleanup)?;
    eprintln!(
        "cdp-supervisor: MCP over HTTP at {}, the supervisor page at http://{}/ ({}; Ctrl-C to stop)",
        server.url(),
        server.local_addr(),
        if with_token {
            "bearer token required"
        } else {
            "no token: loopback only"
        }
    );
    server.wait();
    Ok(())
}

/// Starts the HTTP server on `addr` (`/mcp` when `mcp_endpoint`, the supervisor page always)
/// with the token of the environment, shut down by `cleanup`; and whether a token is set.
fn serve_http(
    config: Config,
    addr: &str,
    mcp_endpoint: bool,
    cleanup: &Cleanup,
) -> Result<(Arc<cdp_supervisor::mcp::http::HttpServer>, bool), String> {
    use cdp_supervisor::mcp::http::{HttpOptions, HttpServer, TOKEN_ENV};
    let token = match std::env::var(TOKEN_ENV) {
        Ok(t) => Some(t),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(format!("{TOKEN_ENV} is not valid text"));
        }
    };
    let options = HttpOptions::from_config(&config)
        .with_addr(addr)
        .with_token(token)
        .with_mcp_endpoint(mcp_endpoint);
    let with_token = options.has_token();
    let server = Arc::new(HttpServer::start(config, options).map_err(|e| e.to_string())?);
    {
        let server = Arc::clone(&server);
        cleanup.on_cleanup(move || server.shutdown());
    }
    Ok((server, with_token))
}

/// Launches the configured/found browser, registering it for cleanup; returns its WebSocket URL.
pub fn launch_browser(config: &Config, cleanup: &Cleanup) -> Result<Option<String>, String> {
    let Some(exe) = find_browser(config.chrome_path()).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let _launching = sync::lock(&cleanup.launching);
    let b = LaunchedBrowser::launch_with(&exe, config.chrome_args(), &cleanup.launch_cancelled)
        .map_err(|e| e.to_string())?;
    cleanup.set_browser(b);
    Ok(cleanup.browser_ws())
}

/// The registry a subcommand's tasks run in: with `--http ADDR` (`http`), the one of the
/// supervisor page's server started there (so that the page shows them; shut down by
/// `cleanup`), else a new one. `watch` and `proxy` share it.
pub fn page_registry(
    config: Config,
    http: Option<&str>,
    cleanup: &Cleanup,
) -> Result<Arc<SupervisorRegistry>, String> {
    let Some(addr) = http else {
        return Ok(Arc::new(SupervisorRegistry::new(config)));
    };
    let (server, with_token) = serve_http(config, addr, false, cleanup)?;
    eprintln!(
        "cdp-supervisor: the supervisor page at http://{}/ ({})",
        server.local_addr(),
        if with_token {
            "token required: open /?token=TOKEN once"
        } else {
            "no token: loopback only"
        }
    );
    Ok(Arc::clone(server.mcp().registry()))
}

/// The browser a subcommand works on: `cdp_url`, else the configured one, else a Chromium it
/// launches (registered with `cleanup`).
pub fn browser_url(
    config: &Config,
    cdp_url: Option<String>,
    cleanup: &Cleanup,
) -> Result<String, String> {
    match cdp_url.or_else(|| config.cdp_url().map(str::to_string)) {
        Some(u) => Ok(u),
        None => launch_browser(config, cleanup)?.ok_or_else(|| {
            "no CDP URL given and no Chromium found (install chromium or set CHROME)".into()
        }),
    }
}

fn watch(
    config: Config,
    cdp_url: Option<String>,
    http: Option<&str>,
    cleanup: &Cleanup,
) -> Result<(), String> {
    let url = browser_url(&config, cdp_url, cleanup)?;
    let registry = page_registry(config, http, cleanup)?;
    cleanup.set_registry(Arc::clone(&registry));
    let sup = registry
        .get_or_start("watch", &url)
        .map_err(|e| e.to_string())?;
    eprintln!("watching {} (Ctrl-C to stop)", sup.cdp_url_redacted());
    let mut last = String::new();
    loop {
        let snap = sup.snapshot();
        let line = snap.to_json().to_string();
        if line != last {
            println!("{line}");
            last = line;
        }
        if !snap.is_active() && !sup.is_alive() {
            if interrupted() {
                return Ok(());
            }
            return Err(format!(
                "the connection ended: {}",
                snap.disconnect_reason
                    .as_deref()
                    .unwrap_or("unknown reason")
            ));
        }
        let v = snap.version;
        sup.wait_for(Duration::from_secs(3600), |s| s.version != v);
    }
}
