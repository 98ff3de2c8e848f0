//! The dialog bridge (SPEC §6) for CDP proxies that close native dialogs before anyone can
//! answer them (Browserbase's closes them within ~10 ms).
//!
//! An injected script replaces `alert`/`confirm`/`prompt` with a synchronous XHR to
//! `http://cdp-dialog-bridge.invalid/?kind=..&message=..&default_prompt=..` (`https://` on https
//! pages, so mixed-content blocking cannot defeat it). `Fetch.enable` with a pattern for that host
//! only pauses those requests; the state machine turns each `Fetch.requestPaused` into a pending
//! dialog, and the answer goes back with `Fetch.fulfillRequest`, so the page's JS receives exactly
//! what a native dialog returns. If the XHR is not intercepted (no bridge on this session, the
//! host does not resolve), the script falls back to the saved native function: a dialog is never
//! silently lost. `beforeunload` stays native.
//!
//! Cost: while `Fetch.enable` is on, Chromium routes every request of the target through its
//! interception machinery, even with a pattern that matches none of them (page loads measured
//! ~1.25x slower with a plain client and no supervisor at all). An attempt to arm interception on
//! demand (the script calls a `Runtime.addBinding` function, the supervisor answers with
//! `Fetch.enable`, the script retries its XHR for a second) fell back to native dialogs every
//! time on Chromium 156: the binding's event did not reach the client while the page's JS kept
//! retrying, most likely because renderer-side notifications are flushed only when the task
//! ends. Hence the default `auto` mode: no bridge, and no cost, until a proxy is seen closing
//! dialogs.

use base64::Engine;
use serde_json::{Value, json};

/// The host the script talks to; `.invalid` never resolves, so nothing leaves the machine.
pub const BRIDGE_HOST: &str = "cdp-dialog-bridge.invalid";

/// The script installed with `Page.addScriptToEvaluateOnNewDocument {runImmediately: true}`.
///
/// What a page sees of it (SPEC §19, measured on the detection page, `tests/it/e2e_stealth.rs`):
/// `alert`, `confirm` and `prompt` are other functions, whose source `Function.prototype.toString`
/// shows and whose frames a thrown error's stack shows; each dialog leaves a resource timing
/// entry for the bridge host. That much cannot be hidden without lying to the page (forging
/// native code, rewriting stacks), which the bridge does not do. What could go did: no global
/// marks the install (a second run recognises its own functions by their source), and the
/// replacements are methods, like the natives: no `prototype`, not constructors, `length` 0.
pub const SCRIPT: &str = r#"(() => {
  const toSource = Function.prototype.toString;
  const ours = (f) => {
    try { return toSource.call(f).includes('cdp-dialog-bridge'); } catch (e) { return false; }
  };
  if (ours(window.alert)) return;
  const native = { alert: window.alert, confirm: window.confirm, prompt: window.prompt };
  const ask = (kind, args) => {
    try {
      const message = args.length > 0 && args[0] !== undefined ? String(args[0]) : '';
      const def = kind === 'prompt' && args.length > 1 && args[1] !== undefined ? String(args[1]) : '';
      const scheme = location.protocol === 'https:' ? 'https' : 'http';
      const xhr = new XMLHttpRequest();
      xhr.open('GET', scheme + '://cdp-dialog-bridge.invalid/?kind=' + kind +
        '&message=' + encodeURIComponent(message) + '&default_prompt=' + encodeURIComponent(def), false);
      xhr.send(null);
      if (xhr.status !== 200) return null;
      const answer = JSON.parse(xhr.responseText);
      return answer && typeof answer === 'object' ? answer : null;
    } catch (e) {
      return null;
    }
  };
  const bridged = {
    alert(...args) { // cdp-dialog-bridge
      if (ask('alert', args) === null) return native.alert.apply(window, args);
    },
    confirm(...args) { // cdp-dialog-bridge
      const a = ask('confirm', args);
      return a === null ? native.confirm.apply(window, args) : a.accept === true;
    },
    prompt(...args) { // cdp-dialog-bridge
      const a = ask('prompt', args);
      if (a === null) return native.prompt.apply(window, args);
      return a.accept === true ? String(a.prompt_text ?? '') : null;
    },
  };
  window.alert = bridged.alert;
  window.confirm = bridged.confirm;
  window.prompt = bridged.prompt;
})();"#;

/// `Fetch.enable` params: pause only requests to the bridge host.
pub fn fetch_enable_params() -> Value {
    json!({"patterns": [
        {"urlPattern": format!("http://{BRIDGE_HOST}/*"), "requestStage": "Request"},
        {"urlPattern": format!("https://{BRIDGE_HOST}/*"), "requestStage": "Request"},
    ]})
}

/// `Page.addScriptToEvaluateOnNewDocument` params.
pub fn add_script_params() -> Value {
    json!({"source": SCRIPT, "runImmediately": true})
}

/// What a paused bridge request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeRequest {
    /// `alert`, `confirm` or `prompt`.
    pub kind: String,
    pub message: String,
    pub default_prompt: String,
}

/// True when `url` is for the bridge host.
pub fn is_bridge_url(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| u.host_str() == Some(BRIDGE_HOST))
}

/// Parses a paused request URL; `None` when it is not for the bridge host.
pub fn parse_request(url: &str) -> Option<BridgeRequest> {
    let u = url::Url::parse(url).ok()?;
    if u.host_str() != Some(BRIDGE_HOST) {
        return None;
    }
    let mut req = BridgeRequest {
        kind: String::new(),
        message: String::new(),
        default_prompt: String::new(),
    };
    for (k, v) in u.query_pairs() {
        match k.as_ref() {
            "kind" => req.kind = v.into_owned(),
            "message" => req.message = v.into_owned(),
            "default_prompt" => req.default_prompt = v.into_owned(),
            _ => {}
        }
    }
    match req.kind.as_str() {
        "alert" | "confirm" | "prompt" => Some(req),
        _ => None,
    }
}

/// `Fetch.fulfillRequest` params answering a bridge dialog. The CORS header matters: the bridge
/// host is cross-origin to every page.
pub fn fulfill_params(request_id: &str, accept: bool, prompt_text: Option<&str>) -> Value {
    let body = json!({"accept": accept, "prompt_text": prompt_text}).to_string();
    json!({
        "requestId": request_id,
        "responseCode": 200,
        "responseHeaders": [
            {"name": "Content-Type", "value": "application/json"},
            {"name": "Access-Control-Allow-Origin", "value": "*"},
            {"name": "Cache-Control", "value": "no-store"},
        ],
        "body": base64::engine::general_purpose::STANDARD.encode(body),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bridge_requests_parse_and_others_do_not() {
        let r = parse_request(
            "http://cdp-dialog-bridge.invalid/?kind=prompt&message=Your%20name%3F%20%E2%9C%93&default_prompt=bob",
        )
        .unwrap();
        assert_eq!(r.kind, "prompt");
        assert_eq!(r.message, "Your name? ✓");
        assert_eq!(r.default_prompt, "bob");
        assert!(parse_request("http://example.com/?kind=alert").is_none());
        assert!(parse_request("http://cdp-dialog-bridge.invalid/?kind=evil").is_none());
        assert!(parse_request("not a url").is_none());
    }

    #[test]
    fn fulfilment_carries_json_and_cors() {
        let p = fulfill_params("R1", true, Some("hi"));
        let body = base64::engine::general_purpose::STANDARD
            .decode(p["body"].as_str().unwrap())
            .unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v, json!({"accept": true, "prompt_text": "hi"}));
        assert!(
            p["responseHeaders"]
                .to_string()
                .contains("Access-Control-Allow-Origin")
        );
    }
}
