//! The task's CDP endpoint through a reconnect and a stop (issue 30 point 7), and the bound on
//! a call waiting for a dialog its client was shown (point 4), on real Chromium.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, HttpServer, RawCdp, Response};

const T: Duration = Duration::from_secs(10);

/// A page on 127.0.0.1 with a cross-origin iframe on localhost (an OOPIF).
fn two_origins() -> (HttpServer, String) {
    let server = HttpServer::start(|req| match req.path.as_str() {
        "/top" => {
            let port = req
                .header("host")
                .and_then(|h| h.rsplit(':').next())
                .unwrap_or("0");
            Response::html(format!(
                "<!doctype html><title>top</title><p>A</p>\
                 <iframe src='http://localhost:{port}/child'></iframe>"
            ))
        }
        "/child" => Response::html("<!doctype html><title>child</title><p>B</p>"),
        _ => Response::not_found(),
    });
    let top = server.url("127.0.0.1", "/top");
    (server, top)
}

/// What a message is, for the record: `method@session` (`-` for none).
fn line(m: &Value) -> String {
    let session = m["sessionId"].as_str().unwrap_or("-");
    match m["method"].as_str() {
        Some(method) => format!("{method}@{session} {}", m["params"]),
        None => format!("reply {}@{session}", m["id"]),
    }
}

/// Measures what Chromium sends a connection when a target it is attached to goes away with a
/// child session under it: the order the endpoint follows for the sessions a dropped upstream
/// connection took (`src/cdp_endpoint/mux/life.rs` gives what was seen).
///
/// `cargo test --test it measure_what_chromium_sends -- --ignored --nocapture`
#[test]
#[ignore = "a measurement: prints what Chromium sends"]
fn measure_what_chromium_sends_when_an_attached_target_goes_away() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let (_server, top) = two_origins();
    let mut cdp = RawCdp::connect(&browser.ws_url).expect("connect");
    // As the endpoint does: a browser session (B), the page attached under it (P), the OOPIF
    // auto-attached under the page (I).
    let b = cdp
        .call("Target.attachToBrowserTarget", json!({}), None, T)
        .expect("a browser session")["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let page = cdp
        .call(
            "Target.createTarget",
            json!({"url": "about:blank"}),
            None,
            T,
        )
        .expect("a page")["targetId"]
        .as_str()
        .unwrap()
        .to_string();
    let p = cdp
        .call(
            "Target.attachToTarget",
            json!({"targetId": page, "flatten": true}),
            Some(&b),
            T,
        )
        .expect("attach the page")["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    cdp.call("Page.enable", json!({}), Some(&p), T).unwrap();
    cdp.call(
        "Target.setAutoAttach",
        json!({"autoAttach": true, "waitForDebuggerOnStart": false, "flatten": true}),
        Some(&p),
        T,
    )
    .unwrap();
    cdp.call("Page.navigate", json!({"url": top}), Some(&p), T)
        .unwrap();
    let att = cdp
        .wait_event_where(T, |e| {
            e["method"] == "Target.attachedToTarget" && e["sessionId"] == p.as_str()
        })
        .expect("the OOPIF attached under the page");
    let i = att["params"]["sessionId"].as_str().unwrap().to_string();
    cdp.call("Runtime.enable", json!({}), Some(&i), T).unwrap();
    cdp.clear_events();
    eprintln!("browser session B={b}, page session P={p}, iframe session I={i}");

    // The iframe's target goes away alone (it turns same-origin: back into the page's
    // renderer), then the page with a child under it (closed from the root).
    let names = [(&b, "B"), (&p, "P"), (&i, "I"), (&page, "PAGE")];
    let expr = "document.querySelector('iframe').src = '/child'; 1";
    cdp.send_command("Runtime.evaluate", json!({"expression": expr}), Some(&p))
        .unwrap();
    let alone = record(&mut cdp, &names, |m| {
        m["method"] == "Target.detachedFromTarget" && m["params"]["sessionId"] == i.as_str()
    });
    eprintln!("what Chromium sent when the iframe's target went away alone:");
    for s in &alone {
        eprintln!("  {s}");
    }
    cdp.call("Page.navigate", json!({"url": top}), Some(&p), T)
        .unwrap();
    let att = cdp
        .wait_event_where(T, |e| {
            e["method"] == "Target.attachedToTarget" && e["sessionId"] == p.as_str()
        })
        .expect("the OOPIF attached under the page again");
    let i2 = att["params"]["sessionId"].as_str().unwrap().to_string();
    cdp.clear_events();
    let names = [(&b, "B"), (&p, "P"), (&i2, "I2"), (&page, "PAGE")];
    cdp.send_command("Target.closeTarget", json!({"targetId": page}), None)
        .unwrap();
    let closed = record(&mut cdp, &names, |m| {
        m["method"] == "Target.detachedFromTarget" && m["params"]["sessionId"] == p.as_str()
    });
    eprintln!("what Chromium sent after Target.closeTarget of the page:");
    for s in &closed {
        eprintln!("  {s}");
    }
}

/// The messages `cdp` gets until `last` and 300 ms after it (at most 10 s), each with the time
/// it came and session ids replaced by `names`.
fn record(
    cdp: &mut RawCdp,
    names: &[(&String, &str)],
    mut last: impl FnMut(&Value) -> bool,
) -> Vec<String> {
    let t = Instant::now();
    let mut seen = Vec::new();
    let mut done = None;
    while t.elapsed() < T && done.is_none_or(|d: Instant| d.elapsed() < Duration::from_millis(300))
    {
        let Ok(Some(m)) = cdp.next_message(Duration::from_millis(100)) else {
            continue;
        };
        let mut text = line(&m);
        for (id, name) in names {
            text = text.replace(id.as_str(), name);
        }
        seen.push(format!("{:>8.1?} {text}", t.elapsed()));
        if done.is_none() && last(&m) {
            done = Some(Instant::now());
        }
    }
    assert!(done.is_some(), "never came: {seen:#?}");
    seen
}
