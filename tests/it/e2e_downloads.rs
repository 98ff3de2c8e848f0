//! Downloads (issue 31.5) on real Chromium: a served file with `Content-Disposition:
//! attachment` lands in the task's own directory under its suggested name, with its bytes; two
//! tasks on one browser each get theirs although the browser keeps one download directory per
//! context; a failed or cancelled download is reported `canceled`; `wait_for_download` waits
//! about 2 s for a late begin and then says none is pending; the task's directory goes at stop
//! unless `downloads.keep`; the policy lets only the task's own directory through.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{HttpServer, Response};
use cdp_supervisor::{
    Config, DownloadState, Downloads, Error, Route, StartOptions, Supervisor, SupervisorRegistry,
    WaitUntil, tools,
};
use serde_json::json;

const T: Duration = Duration::from_secs(10);

/// The bytes `/file` serves: not text-only, so nothing rewrites them on the way.
fn payload() -> Vec<u8> {
    (0..4096u32).map(|i| (i * 7 % 251) as u8).collect()
}

fn server() -> HttpServer {
    HttpServer::start(|req| match req.path.as_str() {
        "/dl" => Response::html(
            "<!doctype html><title>downloads</title>\
             <a id=file href=\"/file\">report</a> <a id=other href=\"/file?n=2\">again</a>",
        ),
        "/file" => Response {
            status: 200,
            content_type: "application/octet-stream".into(),
            body: payload(),
            headers: vec![(
                "Content-Disposition".into(),
                "attachment; filename=\"report.bin\"".into(),
            )],
        },
        _ => Response::not_found(),
    })
}

fn start(reg: &SupervisorRegistry, task: &str, ws: &str) -> Arc<Supervisor> {
    reg.get_or_start_with(task, ws, StartOptions::default().with_own_page(true))
        .expect("start on a page of its own")
}

fn click(sup: &Supervisor, id: &str) {
    sup.call(
        "Runtime.evaluate",
        json!({"expression": format!("document.getElementById('{id}').click(); 1"),
               "userGesture": true}),
        Route::Page,
        T,
    )
    .expect("click the link");
}

#[test]
fn a_download_lands_in_the_tasks_own_directory_with_its_name_and_bytes() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let srv = server();
    let reg = SupervisorRegistry::new(Config::default());
    let sup = start(&reg, "dl-basic", &browser.ws_url);
    let dir = sup
        .download_dir()
        .expect("a download directory")
        .to_path_buf();
    assert!(
        !dir.exists(),
        "named, made by the first download: {}",
        dir.display()
    );
    sup.navigate(&srv.url("127.0.0.1", "/dl"), WaitUntil::Load, T)
        .expect("open the page");
    let t = Instant::now();
    click(&sup, "file");
    let d = sup.wait_for_download(T).expect("the download ends");
    eprintln!("download completed after {:?}: {:?}", t.elapsed(), d.path);
    assert_eq!(d.state, DownloadState::Completed);
    assert_eq!(d.suggested_filename, "report.bin");
    assert_eq!(d.url, srv.url("127.0.0.1", "/file"));
    let path = d.path.clone().expect("a path");
    assert_eq!(path, dir.join("report.bin"));
    assert_eq!(std::fs::read(&path).expect("the file"), payload());
    assert_eq!((d.received_bytes, d.total_bytes), (4096, Some(4096)));

    // A second one of the same name gets a name of its own; the snapshot lists both.
    click(&sup, "other");
    let d2 = sup.wait_for_download(T).expect("the second download");
    assert_ne!(d2.guid, d.guid, "the next download, not the first again");
    assert_eq!(d2.path, Some(dir.join("report (1).bin")));
    let out = tools::browser_snapshot(&reg, "dl-basic", &json!({}));
    let listed = out["downloads"].as_array().expect("downloads");
    assert_eq!(listed.len(), 2, "{out}");
    assert_eq!(listed[0]["state"], "completed");
    assert_eq!(listed[0]["suggested_filename"], "report.bin");
    assert_eq!(listed[0]["path"], json!(path.display().to_string()));
    assert_eq!(listed[0]["received_bytes"], 4096);
    assert!(
        !out.to_string().contains("sessionId") && !out.to_string().contains("session_id"),
        "{out}"
    );

    // Nothing else under way: none pending, after the grace (~2 s) and not before 1.5 s.
    let t = Instant::now();
    let e = sup
        .wait_for_download(T)
        .expect_err("no download is pending");
    let waited = t.elapsed();
    eprintln!("no pending download said after {waited:?}");
    assert!(matches!(e, Error::NoDownload { .. }), "{e:?}");
    assert!(e.to_string().contains("no pending download"), "{e}");
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(3),
        "{waited:?}"
    );

    reg.stop("dl-basic");
    assert!(!dir.exists(), "the task's directory goes with it");
}

#[test]
fn two_tasks_on_one_browser_each_get_their_downloads_in_their_own_directory() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let srv = server();
    let reg = SupervisorRegistry::new(Config::default());
    let a = start(&reg, "dl-task-a", &browser.ws_url);
    // B set the browser's download directory last: A's file is written into B's first.
    let b = start(&reg, "dl-task-b", &browser.ws_url);
    let (dir_a, dir_b) = (
        a.download_dir().unwrap().to_path_buf(),
        b.download_dir().unwrap().to_path_buf(),
    );
    assert_ne!(dir_a, dir_b);
    a.navigate(&srv.url("127.0.0.1", "/dl"), WaitUntil::Load, T)
        .expect("open the page");
    click(&a, "file");
    let d = a.wait_for_download(T).expect("A's download");
    assert_eq!(d.path, Some(dir_a.join("report.bin")));
    assert_eq!(std::fs::read(dir_a.join("report.bin")).unwrap(), payload());
    assert!(
        b.snapshot().downloads.is_empty(),
        "not B's: {:?}",
        b.snapshot().downloads
    );
    assert!(
        std::fs::read_dir(&dir_b).map_or(true, |mut r| r.next().is_none()),
        "nothing left in B's directory"
    );
    reg.stop_all();
}

/// Whether [`partial_server`] cuts its downloads short, and the wake-up of those it holds.
type Cut = Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>;

/// A server that sends a download's headers and part of its body, then holds the connection
/// open, until [`cut_all`]: from then on every download (Chromium retries an interrupted one
/// several times before it gives up) is cut short after its first part.
fn partial_server() -> (u16, Cut) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().unwrap().port();
    let cut: Cut = Arc::default();
    let flag = Arc::clone(&cut);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let flag = Arc::clone(&flag);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let n = conn.read(&mut buf).unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_string();
                if head.starts_with("GET /page") {
                    let body = "<!doctype html><a id=file href=/big>big</a>";
                    let _ = write!(
                        conn,
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                         Connection: close\r\n\r\n{body}",
                        body.len()
                    );
                    return;
                }
                if !head.starts_with("GET /big") {
                    let _ = conn.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    return;
                }
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\
                     Content-Disposition: attachment; filename=\"big.bin\"\r\n\
                     Content-Length: 10000000\r\nConnection: close\r\n\r\n"
                );
                let _ = conn.write_all(&[7u8; 65536]);
                let _ = conn.flush();
                let (lock, wake) = &*flag;
                let guard = lock.lock().unwrap();
                let _ = wake.wait_timeout_while(guard, Duration::from_secs(30), |cut| !*cut);
                let _ = conn.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    (port, cut)
}

fn cut_all(cut: &Cut) {
    *cut.0.lock().unwrap() = true;
    cut.1.notify_all();
}

#[test]
fn a_cancelled_and_a_failed_download_are_reported_canceled() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let (port, cut) = partial_server();
    let reg = SupervisorRegistry::new(Config::default());
    let sup = start(&reg, "dl-fail", &browser.ws_url);
    sup.navigate(&format!("http://127.0.0.1:{port}/page"), WaitUntil::Load, T)
        .expect("open the page");

    // Cancelled by the agent (Browser.cancelDownload through browser_cdp).
    click(&sup, "file");
    let begun = sup
        .wait_for(T, |s| s.downloads.iter().any(|d| d.received_bytes > 0))
        .expect("the download is under way");
    let first = begun.downloads[0].clone();
    assert_eq!(first.total_bytes, Some(10_000_000));
    let out = tools::browser_cdp(
        &reg,
        "dl-fail",
        &json!({"method": "Browser.cancelDownload", "params": {"guid": first.guid}}),
    );
    assert_eq!(out["success"], true, "{out}");
    let d = sup.wait_for_download(T).expect("it ends");
    assert_eq!((&d.guid, d.state), (&first.guid, DownloadState::Canceled));
    assert!(d.path.is_none());

    // Cut short by the server, every time Chromium tries again: a failed download.
    cut_all(&cut);
    let t = Instant::now();
    click(&sup, "file");
    let d = sup
        .wait_for_download(Duration::from_secs(30))
        .expect("it ends");
    eprintln!(
        "the failed download was reported {} after {:?}",
        d.state,
        t.elapsed()
    );
    assert_ne!(d.guid, first.guid);
    assert_eq!(d.state, DownloadState::Canceled);
    let j = sup.snapshot().to_json();
    assert_eq!(j["downloads"][1]["state"], "canceled", "{j}");
    reg.stop_all();
}

#[test]
fn the_policy_lets_only_the_tasks_own_download_directory_through_and_keep_keeps_it() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let parent = std::env::temp_dir().join(format!("cdp-dl-keep-test-{}", std::process::id()));
    let config =
        Config::default().with_downloads(Downloads::default().with_dir(&parent).with_keep(true));
    let reg = SupervisorRegistry::new(config);
    let sup = start(&reg, "dl-policy", &browser.ws_url);
    let dir = sup.download_dir().unwrap().to_path_buf();
    assert!(
        dir.starts_with(&parent),
        "{} under downloads.dir",
        dir.display()
    );
    let own = json!({"method": "Browser.setDownloadBehavior",
                     "params": {"behavior": "allowAndName", "downloadPath": dir.display().to_string(),
                                "eventsEnabled": true}});
    let out = tools::browser_cdp(&reg, "dl-policy", &own);
    assert_eq!(out["success"], true, "its own directory passes: {out}");
    let other = json!({"method": "Browser.setDownloadBehavior",
                       "params": {"behavior": "allow", "downloadPath": "/tmp"}});
    let out = tools::browser_cdp(&reg, "dl-policy", &other);
    assert_eq!(out["refused_by"], "security.allow_file_urls", "{out}");
    // What a download would leave there (the browser makes the directory with the first one).
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("kept.bin"), b"kept").unwrap();
    reg.stop("dl-policy");
    assert!(dir.join("kept.bin").is_file(), "downloads.keep keeps it");
    std::fs::remove_dir_all(&parent).expect("clean up");
    assert!(!Path::new(&parent).exists());
}
