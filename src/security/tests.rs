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
