//! Unit tests of the security rules.

use super::*;
use serde_json::json;

fn refused_by(sec: &Security, method: &str, params: Value) -> Option<&'static str> {
    check(sec, method, &params).err().map(|(option, _)| option)
}

fn open() -> Security {
    Security {
        allow_file_urls: true,
        allow_file_access: true,
        allow_page_protocol: true,
        ..Security::default()
    }
}

#[test]
fn every_url_parameter_is_judged() {
    let sec = Security::default();
    for (method, keys) in URL_PARAMS {
        for key in *keys {
            let bad = json!({ *key: "\u{1}FI\tLE:///etc/passwd" });
            assert_eq!(
                refused_by(&sec, method, bad),
                Some(FILE_URLS),
                "{method} {key}"
            );
            let devtools = json!({ *key: "devtools://devtools/bundled/devtools_app.html" });
            assert_eq!(
                refused_by(&sec, method, devtools),
                Some(PAGE_PROTOCOL),
                "{method}"
            );
            let web = json!({ *key: "https://example.com/" });
            assert_eq!(refused_by(&sec, method, web), None, "{method} {key}");
            assert_eq!(
                refused_by(&open(), method, json!({ *key: "file:///etc/passwd" })),
                None
            );
        }
    }
    // A URL in a method that loads nothing is not judged.
    assert_eq!(
        refused_by(&sec, "Network.setCookie", json!({"url": "file:///x"})),
        None
    );
    let (_, why) = check(
        &sec,
        "Page.navigate",
        &json!({"url": " file:///etc/passwd"}),
    )
    .expect_err("refused");
    assert_eq!(
        why,
        "url \" file:///etc/passwd\" is a file: URL (read as Chromium reads it); set \
         security.allow_file_urls = true to allow it"
    );
}

#[test]
fn download_paths_are_refused_unless_file_urls_are_allowed() {
    for method in ["Page.setDownloadBehavior", "Browser.setDownloadBehavior"] {
        let p = json!({"behavior": "allow", "downloadPath": "/root/.ssh"});
        assert_eq!(
            refused_by(&Security::default(), method, p.clone()),
            Some(FILE_URLS)
        );
        assert_eq!(refused_by(&open(), method, p), None);
        let no_path = json!({"behavior": "deny"});
        assert_eq!(refused_by(&Security::default(), method, no_path), None);
    }
}

#[test]
fn methods_that_hand_local_files_to_the_page_need_allow_file_access() {
    let sec = Security::default();
    let refused = [
        (
            "DOM.setFileInputFiles",
            json!({"files": ["/etc/passwd"], "nodeId": 1}),
        ),
        (
            "DOM.setFileInputFiles",
            json!({"files": "/etc/passwd", "nodeId": 1}),
        ),
        (
            "Input.dispatchDragEvent",
            json!({"type": "drop", "x": 1, "y": 1,
                   "data": {"items": [], "files": ["/etc/passwd"], "dragOperationsMask": 1}}),
        ),
        (
            "Page.setInterceptFileChooserDialog",
            json!({"enabled": true}),
        ),
        (
            "Page.setInterceptFileChooserDialog",
            json!({"enabled": true, "cancel": true}),
        ),
        (
            "Page.handleFileChooser",
            json!({"action": "accept", "files": ["/etc/passwd"]}),
        ),
        (
            "PWA.launchFilesInApp",
            json!({"manifestId": "https://a.test/", "files": ["/x"]}),
        ),
        (
            "Extensions.loadUnpacked",
            json!({"path": "/home/me/project"}),
        ),
    ];
    for (method, params) in refused {
        assert_eq!(
            refused_by(&sec, method, params.clone()),
            Some(FILE_ACCESS),
            "{method}"
        );
        assert_eq!(refused_by(&open(), method, params), None, "{method}");
    }
    let harmless = [
        ("DOM.setFileInputFiles", json!({"files": [], "nodeId": 1})),
        (
            "Input.dispatchDragEvent",
            json!({"type": "drop", "x": 1, "y": 1,
                   "data": {"items": [{"mimeType": "text/plain", "data": "x"}],
                            "dragOperationsMask": 1}}),
        ),
        (
            "Page.setInterceptFileChooserDialog",
            json!({"enabled": false}),
        ),
        ("Page.handleFileChooser", json!({"action": "cancel"})),
    ];
    for (method, params) in harmless {
        assert_eq!(refused_by(&sec, method, params), None, "{method}");
    }
}

#[test]
fn handing_the_protocol_to_a_page_needs_allow_page_protocol() {
    let sec = Security::default();
    for method in PAGE_PROTOCOL_METHODS {
        let p = json!({"targetId": "T", "bindingName": "cdp"});
        assert_eq!(
            refused_by(&sec, method, p.clone()),
            Some(PAGE_PROTOCOL),
            "{method}"
        );
        assert_eq!(refused_by(&open(), method, p), None, "{method}");
    }
}

#[test]
fn a_command_inside_send_message_to_target_is_checked_like_any_other() {
    let sec = Security::default();
    let msg = |v: Value| json!({"sessionId": "S", "message": v.to_string()});
    let navigate = json!({"id": 1, "method": "Page.navigate",
                          "params": {"url": "view-source: file:///etc/passwd"}});
    let (option, why) = check(&sec, "Target.sendMessageToTarget", &msg(navigate.clone()))
        .expect_err("a nested file: navigation is refused");
    assert_eq!(option, FILE_URLS);
    assert!(why.starts_with("its nested Page.navigate: url "), "{why}");
    // Nested twice.
    let twice = msg(json!({"id": 2, "method": "Target.sendMessageToTarget",
                           "params": msg(navigate)}));
    assert_eq!(
        refused_by(&sec, "Target.sendMessageToTarget", twice),
        Some(FILE_URLS)
    );
    for inner in [
        json!({"id": 3, "method": "Target.exposeDevToolsProtocol", "params": {"targetId": "T"}}),
        json!({"id": 4, "method": "DOM.setFileInputFiles",
               "params": {"files": ["/etc/passwd"], "nodeId": 1}}),
    ] {
        assert!(refused_by(&sec, "Target.sendMessageToTarget", msg(inner)).is_some());
    }
    // The patterns apply inside too.
    let mut deny = open();
    deny.cdp_deny = vec!["Page.*".into()];
    let inner = msg(json!({"id": 5, "method": "Page.reload"}));
    assert_eq!(
        refused_by(&deny, "Target.sendMessageToTarget", inner),
        Some("security.cdp_deny")
    );
    // An ordinary nested command may still run on any target: only allow_page_protocol
    // lets it through, and the nested command is still checked then.
    let eval = msg(json!({"id": 6, "method": "Runtime.evaluate",
                          "params": {"expression": "1"}}));
    assert_eq!(
        refused_by(&sec, "Target.sendMessageToTarget", eval.clone()),
        Some(PAGE_PROTOCOL)
    );
    let protocol = Security {
        allow_page_protocol: true,
        ..Security::default()
    };
    assert_eq!(
        refused_by(&protocol, "Target.sendMessageToTarget", eval),
        None
    );
    let navigate = msg(json!({"id": 7, "method": "Page.navigate",
                              "params": {"url": "file:///etc/passwd"}}));
    assert_eq!(
        refused_by(&protocol, "Target.sendMessageToTarget", navigate),
        Some(FILE_URLS)
    );
}

#[test]
fn a_message_that_cannot_be_read_as_chromium_reads_it_is_refused() {
    let sec = Security::default();
    let send = |m: &str| json!({"sessionId": "S", "message": m});
    for message in [
        // Chromium keeps the last `url`: this one navigates to the file.
        r#"{"id":1,"method":"Page.navigate","params":{"url":"http://a.test/","url":"file:///etc/passwd"}}"#,
        r#"{"id":1,"method":"Runtime.evaluate","method":"Page.navigate","params":{}}"#,
        r#"{'id':1,'method':'Page.navigate'}"#,
        r#"{"id":1,"method":"Page.navigate","params":{"url":"file:///x"}}garbage"#,
        "\u{feff}{\"id\":1,\"method\":\"Page.navigate\"}",
        r#"{"id":1,"params":{}}"#,
        r#"{"id":1,"method":"Page.navigate","params":"file:///x"}"#,
        r#"[{"id":1,"method":"Page.navigate","params":{"url":"file:///x"}}]"#,
        r#"{"id":1,"method":"Runtime.evaluate","params":{"expression":"\ud800"}}"#,
        "",
    ] {
        let (option, why) =
            check(&sec, "Target.sendMessageToTarget", &send(message)).expect_err(message);
        assert_eq!(option, FILE_URLS, "{message}");
        assert!(why.contains("cannot be checked"), "{why}");
    }
    // Nested calls, up to MAX_NESTING deep.
    let wrapped = |depth: usize| {
        let mut m = json!({"method": "Runtime.evaluate", "params": {"expression": "1"}});
        for _ in 0..depth {
            m = json!({"id": 1, "method": "Target.sendMessageToTarget",
                       "params": {"sessionId": "S", "message": m.to_string()}});
        }
        m["params"].clone()
    };
    let protocol = Security {
        allow_page_protocol: true,
        ..Security::default()
    };
    assert_eq!(
        refused_by(
            &protocol,
            "Target.sendMessageToTarget",
            wrapped(MAX_NESTING)
        ),
        None
    );
    let (_, why) = check(
        &sec,
        "Target.sendMessageToTarget",
        &wrapped(MAX_NESTING + 1),
    )
    .expect_err("too deep");
    assert!(why.contains("nested too deeply"), "{why}");
    // With every rule off there is nothing to check.
    let dup = r#"{"id":1,"method":"Page.navigate","params":{"url":"a","url":"file:///x"}}"#;
    assert_eq!(
        refused_by(&open(), "Target.sendMessageToTarget", send(dup)),
        None
    );
    let mut allow = open();
    allow.cdp_allow = vec!["Target.*".into()];
    assert_eq!(
        refused_by(&allow, "Target.sendMessageToTarget", send(dup)),
        Some("security.cdp_allow")
    );
}

#[test]
fn long_values_are_cut_in_the_message() {
    let url = format!("file:///{}", "a".repeat(100_000));
    let (_, why) =
        check(&Security::default(), "Page.navigate", &json!({"url": url})).expect_err("refused");
    assert!(why.len() < 400, "{why}");
}

/// The task endpoint judges a client's command on [`judged_params`]: for every rule, the
/// verdict (and its words) is the one the whole `params` gets, escaped and repeated keys and
/// parameters that are not an object included; what no rule reads is not built.
#[test]
fn judged_params_decide_as_the_whole_params_do() {
    struct Task;
    impl isolation::Reach for Task {
        fn owns_target(&self, target_id: &str) -> bool {
            target_id == "MINE"
        }
        fn owns_frame(&self, frame_id: &str) -> bool {
            frame_id == "MINE"
        }
        fn owns_context(&self, context_id: &str) -> bool {
            context_id == "CTX"
        }
    }
    let nested = |inner: &str| serde_json::to_string(&json!({ "message": inner })).unwrap();
    let cases: Vec<(&str, String)> = vec![
        ("Page.navigate", r#"{"url":"file:///etc/passwd","frameId":"F"}"#.into()),
        ("Page.navigate", r#"{"url":"https://example.com/"}"#.into()),
        ("Page.navigate", r#"{"u\u0072l":"file:///etc/passwd"}"#.into()),
        ("Page.navigate", r#"{"url":"https://a/","url":"file:///x"}"#.into()),
        ("Page.navigate", r#"{"url":"file:///x","url":"https://a/"}"#.into()),
        ("Target.createTarget", r#"{"url":"chrome://settings","browserContextId":"CTX"}"#.into()),
        ("Target.createTarget", r#"{"url":"about:blank","browserContextId":"OTHER"}"#.into()),
        ("PWA.install", r#"{"manifestId":"file:///m","installUrlOrBundleUrl":"x"}"#.into()),
        ("PWA.install", r#"{"manifestId":"https://a/m","installUrlOrBundleUrl":"file:///b"}"#.into()),
        ("Browser.setDownloadBehavior", r#"{"behavior":"allow","downloadPath":"/tmp/x"}"#.into()),
        ("Page.setDownloadBehavior", r#"{"behavior":"deny","downloadPath":null}"#.into()),
        ("DOM.setFileInputFiles", r#"{"files":["/etc/passwd"],"nodeId":3}"#.into()),
        ("DOM.setFileInputFiles", r#"{"files":[],"nodeId":3}"#.into()),
        ("Input.dispatchDragEvent", r#"{"type":"drop","data":{"items":[],"files":["/x"]}}"#.into()),
        ("Input.dispatchDragEvent", r#"{"type":"drop","data":{"items":[]}}"#.into()),
        ("Page.setInterceptFileChooserDialog", r#"{"enabled":false}"#.into()),
        ("Page.setInterceptFileChooserDialog", r#"{"enabled":true}"#.into()),
        ("Page.handleFileChooser", r#"{"action":"accept","files":["/x"]}"#.into()),
        ("Extensions.loadUnpacked", r#"{"path":"/x"}"#.into()),
        ("Target.exposeDevToolsProtocol", r#"{"targetId":"MINE"}"#.into()),
        ("Target.attachToTarget", r#"{"targetId":"MINE","flatten":true}"#.into()),
        ("Target.attachToTarget", r#"{"targetId":"OTHER","flatten":true}"#.into()),
        ("Target.attachToTarget", r#"{"target\u0049d":"OTHER"}"#.into()),
        ("Target.attachToTarget", r#"{"targetId":"MINE","targetId":"OTHER"}"#.into()),
        ("Target.attachToTarget", r#"{"targetId":"OTHER","targetId":"MINE"}"#.into()),
        ("Target.attachToTarget", r#"{"targetId":7}"#.into()),
        ("Target.closeTarget", r#"{"targetId":null}"#.into()),
        ("Target.disposeBrowserContext", r#"{"browserContextId":"OTHER"}"#.into()),
        ("Target.attachToBrowserTarget", "{}".into()),
        ("Target.sendMessageToTarget", nested(r#"{"id":1,"method":"Page.navigate","params":{"url":"file:///x"}}"#)),
        ("Target.sendMessageToTarget", nested(r#"{"id":1,"method":"Target.closeTarget","params":{"targetId":"OTHER"}}"#)),
        ("Target.sendMessageToTarget", nested("not json")),
        (
            "Runtime.callFunctionOn",
            r#"{"functionDeclaration":"() => 1\n//# sourceURL=pptr:evaluate;file%3A%2F%2F%2Fx.mjs%3A8%3A12\n","executionContextId":1,"arguments":[{"value":{"deep":[1,2,{"url":"file:///x"}]}}],"returnByValue":true,"awaitPromise":true,"userGesture":true}"#.into(),
        ),
        ("Runtime.evaluate", "[]".into()),
        ("Runtime.evaluate", r#""x""#.into()),
        ("Runtime.evaluate", "null".into()),
        ("Runtime.evaluate", " \n{ }".into()),
    ];
    let strict = Security {
        allow_file_urls: false,
        allow_file_access: false,
        allow_page_protocol: false,
        isolate_tasks: true,
        ..Security::default()
    };
    let isolated_only = Security {
        isolate_tasks: true,
        ..open()
    };
    let mut refused = 0;
    for sec in [&strict, &isolated_only, &open()] {
        for (method, raw) in &cases {
            let whole: Value = serde_json::from_str(raw).expect("valid JSON");
            let judged = judged_params(raw).expect("judged params");
            let verdict = |p: &Value| format!("{:?}", judge_task_call(sec, None, &Task, method, p));
            assert_eq!(verdict(&judged), verdict(&whole), "{method} {raw}");
            refused += usize::from(judge_task_call(sec, None, &Task, method, &whole).is_err());
        }
    }
    assert!(refused > 30, "the cases exercise refusals too: {refused}");
    let puppeteer = &cases
        .iter()
        .find(|(m, _)| *m == "Runtime.callFunctionOn")
        .unwrap()
        .1;
    assert_eq!(judged_params(puppeteer).unwrap(), json!({}));
    let malformed = judged_params(r#"{"targetId":"MINE","arguments":[1,}"#);
    assert!(malformed.is_err(), "{malformed:?}");
}
