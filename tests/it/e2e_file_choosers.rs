//! File choosers (issue 31.6) on real Chromium: with `security.allow_file_access` a chooser the
//! page opens is pending (frame, mode, the input's backend node) and answered with files from
//! `security.upload_dirs`, and the page reads their names and bytes, in the page and in a
//! cross-site iframe; paths outside (and symlinks pointing outside) are refused naming the
//! option; with the default the chooser is left unanswered and the snapshot says which option
//! allows it.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::common::pages::wait_pick;
use crate::common::{HttpServer, Response};
use cdp_supervisor::{
    ChooserMode, Config, Error, Route, Security, StartOptions, Supervisor, SupervisorRegistry,
    WaitUntil, tools,
};
use serde_json::json;

const T: Duration = Duration::from_secs(10);

/// A page whose file input shows what it got: every file's name and text.
const INPUT: &str = "<!doctype html><title>upload</title>\
    <input type=file id=one><input type=file id=many multiple><pre id=out></pre><script>\
    for (const i of document.querySelectorAll('input')) i.onchange = async () => {\
      const got = [];\
      for (const f of i.files) got.push(f.name + '=' + await f.text());\
      out.textContent = i.id + ':' + got.join(',');\
    };</script>";

fn server() -> HttpServer {
    HttpServer::start(|req| match req.path.as_str() {
        "/upload" => Response::html(INPUT),
        "/framed" => {
            // The iframe's origin is another site: an out-of-process iframe.
            let port = req
                .header("host")
                .and_then(|h| h.rsplit(':').next())
                .unwrap_or("0")
                .to_string();
            Response::html(format!(
                "<!doctype html><iframe id=f src=\"http://localhost:{port}/upload\"></iframe>"
            ))
        }
        _ => Response::not_found(),
    })
}

/// A directory of its own with `hello.txt`, `second.txt`, and outside it `secret.txt` with a
/// symlink to it inside.
struct Files {
    root: PathBuf,
    uploads: PathBuf,
}

impl Files {
    fn new(tag: &str) -> Files {
        let root = std::env::temp_dir().join(format!("cdp-choosers-{tag}-{}", std::process::id()));
        let uploads = root.join("uploads");
        std::fs::create_dir_all(&uploads).unwrap();
        std::fs::write(uploads.join("hello.txt"), "HELLO-BYTES").unwrap();
        std::fs::write(uploads.join("second.txt"), "SECOND").unwrap();
        std::fs::write(root.join("secret.txt"), "SECRET").unwrap();
        std::os::unix::fs::symlink(root.join("secret.txt"), uploads.join("link.txt")).unwrap();
        Files { root, uploads }
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn start(reg: &SupervisorRegistry, task: &str, ws: &str) -> Arc<Supervisor> {
    reg.get_or_start_with(task, ws, StartOptions::default().with_own_page(true))
        .expect("start on a page of its own")
}

/// Clicks input `id` (with a user gesture, as a person would), in `frame` when given.
fn click(sup: &Supervisor, id: &str, frame: Option<&str>) {
    let route = frame.map_or(Route::Page, Route::Frame);
    sup.call(
        "Runtime.evaluate",
        json!({"expression": format!("document.getElementById('{id}').click(); 1"),
               "userGesture": true}),
        route,
        T,
    )
    .expect("click the input");
}

/// What the page's input reported (`<id>:<name>=<text>,...`), once it has.
fn read_out(sup: &Supervisor, frame: Option<&str>) -> String {
    let route = frame.map_or(Route::Page, Route::Frame);
    common::wait_until(T, || {
        let v = sup
            .call(
                "Runtime.evaluate",
                json!({"expression": "document.getElementById('out').textContent",
                       "returnByValue": true}),
                route,
                T,
            )
            .ok()?;
        let s = v["result"]["value"].as_str()?.to_string();
        (!s.is_empty()).then_some(s)
    })
    .expect("the page read the files")
}

fn allowing(dir: &Path) -> Config {
    Config::default().with_security(
        Security::default()
            .with_allow_file_access(true)
            .with_upload_dirs([dir]),
    )
}

#[test]
fn a_chooser_is_pending_and_answered_with_files_the_page_reads() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let srv = server();
    let files = Files::new("answer");
    let reg = SupervisorRegistry::new(allowing(&files.uploads));
    let sup = start(&reg, "chooser-answer", &browser.ws_url);
    let page = sup.snapshot().page_target_id.clone().unwrap();
    sup.navigate(&srv.url("127.0.0.1", "/upload"), WaitUntil::Load, T)
        .expect("open the page");

    click(&sup, "one", None);
    let c = wait_pick(&sup, T, "a pending chooser", |s| {
        s.file_choosers.first().cloned()
    });
    assert_eq!((c.id.as_str(), c.mode), ("fc-1", ChooserMode::Single));
    assert_eq!(c.frame_id.as_deref(), Some(page.as_str()));
    assert!(c.backend_node_id > 0);
    let j = sup.snapshot().to_json();
    let entry = &j["pending_dialogs"][0];
    assert_eq!(entry["type"], "file_chooser", "{j}");
    assert_eq!(entry["mode"], "single", "{j}");
    assert_eq!(entry["backend_node_id"], c.backend_node_id, "{j}");
    // Not a dialog: it blocks nothing.
    assert_eq!(
        sup.call(
            "Runtime.evaluate",
            json!({"expression": "1+1", "returnByValue": true}),
            Route::Page,
            T
        )
        .expect("the page answers")["result"]["value"],
        2
    );
    // A single chooser takes one file; paths outside (and symlinks that point outside) are
    // refused naming the option.
    let two = [
        files.uploads.join("hello.txt"),
        files.uploads.join("second.txt"),
    ];
    assert!(matches!(
        sup.respond_to_file_chooser(&two, None),
        Err(Error::InvalidArgument(_))
    ));
    for outside in [
        files.root.join("secret.txt"),
        files.uploads.join("link.txt"),
    ] {
        let e = sup
            .respond_to_file_chooser(std::slice::from_ref(&outside), None)
            .expect_err("outside security.upload_dirs");
        assert!(
            matches!(&e, Error::Refused { option, .. } if option == "security.upload_dirs"),
            "{e}"
        );
    }
    let out = tools::browser_dialog(
        &reg,
        "chooser-answer",
        &json!({"action": "accept", "files": [files.root.join("secret.txt")]}),
    );
    assert_eq!(out["refused_by"], "security.upload_dirs", "{out}");

    sup.respond_to_file_chooser(&[files.uploads.join("hello.txt")], Some(&c.id))
        .expect("answer with a file");
    assert_eq!(read_out(&sup, None), "one:hello.txt=HELLO-BYTES");
    assert!(sup.snapshot().file_choosers.is_empty());

    // The tool, for a chooser of several files.
    sup.call(
        "Runtime.evaluate",
        json!({"expression": "out.textContent = ''"}),
        Route::Page,
        T,
    )
    .unwrap();
    click(&sup, "many", None);
    let c = wait_pick(&sup, T, "the second chooser", |s| {
        s.file_choosers.first().cloned()
    });
    assert_eq!(c.mode, ChooserMode::Multiple);
    let out = tools::browser_dialog(
        &reg,
        "chooser-answer",
        &json!({"action": "accept", "dialog_id": c.id, "files": two}),
    );
    assert_eq!(out["success"], true, "{out}");
    assert_eq!(out["dialog"]["type"], "file_chooser", "{out}");
    assert_eq!(
        read_out(&sup, None),
        "many:hello.txt=HELLO-BYTES,second.txt=SECOND"
    );

    // Dismissed: no longer pending, and the page got nothing.
    sup.call(
        "Runtime.evaluate",
        json!({"expression": "out.textContent = ''"}),
        Route::Page,
        T,
    )
    .unwrap();
    click(&sup, "one", None);
    wait_pick(&sup, T, "a third chooser", |s| {
        s.file_choosers.first().cloned()
    });
    let out = tools::browser_dialog(&reg, "chooser-answer", &json!({"action": "dismiss"}));
    assert_eq!(out["success"], true, "{out}");
    assert!(sup.snapshot().file_choosers.is_empty());
    reg.stop_all();
}

#[test]
fn a_chooser_in_a_cross_site_iframe_is_answered_there() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let srv = server();
    let files = Files::new("oopif");
    let reg = SupervisorRegistry::new(allowing(&files.uploads));
    let sup = start(&reg, "chooser-oopif", &browser.ws_url);
    sup.navigate(&srv.url("127.0.0.1", "/framed"), WaitUntil::Load, T)
        .expect("open the page");
    let frame = wait_pick(&sup, T, "the OOPIF", |s| {
        s.frames
            .values()
            .find(|f| f.is_oopif && f.url.ends_with("/upload"))
            .map(|f| f.frame_id.clone())
    });
    click(&sup, "one", Some(&frame));
    let c = wait_pick(&sup, T, "the iframe's chooser", |s| {
        s.file_choosers.first().cloned()
    });
    assert_eq!(c.frame_id.as_deref(), Some(frame.as_str()));
    sup.respond_to_file_chooser(&[files.uploads.join("hello.txt")], None)
        .expect("answer it");
    assert_eq!(read_out(&sup, Some(&frame)), "one:hello.txt=HELLO-BYTES");
    reg.stop_all();
}

#[test]
fn by_default_a_chooser_is_refused_and_the_snapshot_names_the_option() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let srv = server();
    let files = Files::new("default");
    let reg = SupervisorRegistry::new(Config::default());
    let sup = start(&reg, "chooser-default", &browser.ws_url);
    sup.navigate(&srv.url("127.0.0.1", "/upload"), WaitUntil::Load, T)
        .expect("open the page");
    click(&sup, "one", None);
    let r = wait_pick(&sup, T, "the refusal", |s| s.file_chooser_refused.clone());
    assert_eq!((r.mode, r.count), (ChooserMode::Single, 1));
    let j = tools::browser_snapshot(&reg, "chooser-default", &json!({}));
    assert_eq!(
        j["file_chooser_refused"]["option"], "security.allow_file_access",
        "{j}"
    );
    assert!(j["pending_dialogs"].as_array().unwrap().is_empty(), "{j}");
    let e = sup
        .respond_to_file_chooser(&[files.uploads.join("hello.txt")], None)
        .expect_err("refused");
    assert!(
        matches!(&e, Error::Refused { option, .. } if option == "security.allow_file_access"),
        "{e}"
    );
    let out = tools::browser_dialog(
        &reg,
        "chooser-default",
        &json!({"action": "accept", "files": [files.uploads.join("hello.txt")]}),
    );
    assert_eq!(out["refused_by"], "security.allow_file_access", "{out}");
    // The page got nothing.
    let v = sup
        .call("Runtime.evaluate", json!({"expression": "document.getElementById('one').files.length", "returnByValue": true}), Route::Page, T)
        .unwrap();
    assert_eq!(v["result"]["value"], 0);
    reg.stop_all();
}
