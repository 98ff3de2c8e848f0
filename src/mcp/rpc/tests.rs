//! Unit tests of the JSON-RPC messages: classification, ids.

use super::*;

fn error_of(i: Option<Incoming>) -> (i64, Value) {
    match i {
        Some(Incoming::Invalid(line)) => {
            let v: Value = serde_json::from_str(&line).expect("one JSON message");
            (v["error"]["code"].as_i64().unwrap_or(0), v["id"].clone())
        }
        other => panic!("not invalid: {other:?}"),
    }
}

fn request_id(line: &str) -> Id {
    match classify(line.as_bytes()) {
        Some(Incoming::Request { id, .. }) => id,
        other => panic!("not a request: {other:?}"),
    }
}

#[test]
fn strict_classification() {
    let c = |s: &str| classify(s.as_bytes());
    assert_eq!(c("  "), None);
    assert_eq!(
        error_of(c(r#"{"id":1,"method":"ping"}"#)),
        (-32600, json!(1))
    );
    assert_eq!(
        error_of(c(r#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#)),
        (-32600, json!("a"))
    );
    assert_eq!(error_of(c("[]")), (-32600, Value::Null));
    assert_eq!(error_of(c("[")), (-32700, Value::Null));
    assert_eq!(error_of(c("42")), (-32600, Value::Null));
    assert_eq!(error_of(c("{")), (-32700, Value::Null));
    assert_eq!(
        c(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
        Some(Incoming::Response)
    );
    assert_eq!(
        c(r#"{"id":3,"error":{"code":1}}"#),
        Some(Incoming::Response)
    );
    assert_eq!(
        c(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
        Some(Incoming::Notification {
            method: "notifications/initialized".into(),
            params: Value::Null,
            request_id: None,
        })
    );
    match c(r#"{"jsonrpc":"2.0","id":"x","method":"ping","params":{}}"#) {
        Some(Incoming::Request { id, method, params }) => {
            assert_eq!(
                (id.raw(), method.as_str(), params),
                ("\"x\"", "ping", json!({}))
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        error_of(c(
            r#"{"jsonrpc":"2.0","id":4,"method":"ping","params":[1]}"#
        )),
        (-32602, json!(4))
    );
    // Ids that are neither strings nor numbers: -32600, id null.
    for id in ["null", "{}", "[1]", "true", "false"] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        assert_eq!(error_of(c(&line)), (-32600, Value::Null), "{line}");
    }
    // A duplicate member is refused rather than guessed at.
    assert_eq!(
        error_of(c(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#)),
        (-32600, Value::Null)
    );
}

#[test]
fn ids_are_echoed_byte_for_byte() {
    for raw in [
        "18446744073709551616",
        "-0",
        "1.0",
        "1e0",
        "1E+2",
        "-12.500e-3",
        "123456789012345678901234567890.000000000000000000001",
        "1e400",
        "0.0000000000000000000000000000000000000000001",
        r#""a\u0062c""#,
        r#""\ud800""#,
        r#""x\udc00y""#,
        r#""\ud83d\ude00""#,
        r#""é \"quoted\" \\ \/""#,
    ] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{raw},"method":"ping"}}"#);
        let id = request_id(&line);
        assert_eq!(id.raw(), raw);
        let answer = result(&id, &json!({}));
        assert_eq!(
            answer,
            format!(r#"{{"jsonrpc":"2.0","id":{raw},"result":{{}}}}"#)
        );
        let answer = error(Some(&id), code::METHOD_NOT_FOUND, "no");
        assert!(answer.contains(&format!(r#""id":{raw},"#)), "{answer}");
    }
    // Whitespace around the id is not part of it.
    assert_eq!(
        request_id(r#"{"jsonrpc":"2.0","id":   7  ,"method":"ping"}"#).raw(),
        "7"
    );
}

#[test]
fn ids_compare_as_json_rpc_says() {
    let key = |raw: &str| {
        request_id(&format!(
            r#"{{"jsonrpc":"2.0","id":{raw},"method":"ping"}}"#
        ))
        .key()
    };
    // Numbers by exact value.
    for same in [
        ["1", "1.0", "1e0"],
        ["1", "10e-1", "0.1E1"],
        ["0", "-0", "0.000e9"],
        ["-0.0", "0e-7", "0"],
        ["1500", "1.5e3", "15E+2"],
        [
            "18446744073709551616",
            "1.8446744073709551616e19",
            "18446744073709551616.0",
        ],
    ] {
        assert_eq!(key(same[0]), key(same[1]), "{same:?}");
        assert_eq!(key(same[0]), key(same[2]), "{same:?}");
    }
    for (a, b) in [
        ("1", "2"),
        ("18446744073709551616", "18446744073709551617"),
        ("18446744073709551616", "18446744073709551615"),
        ("1", "-1"),
        ("1e1", "1e-1"),
        ("9007199254740993", "9007199254740992"),
    ] {
        assert_ne!(key(a), key(b), "{a} vs {b}");
    }
    // Strings by value, and never equal to a number.
    assert_eq!(key(r#""ab""#), key(r#""a\u0062""#));
    assert_ne!(key(r#""1""#), key("1"));
    assert_ne!(key(r#""a""#), key(r#""A""#));
    // By UTF-16 code units: lone surrogates stay themselves, a pair is its character.
    assert_eq!(key(r#""\ud800""#), IdKey::Str(vec![0xd800]));
    assert_ne!(key(r#""\ud800""#), key(r#""\ud801""#));
    assert_ne!(key(r#""\ud800""#), key(r#""\ufffd""#));
    assert_eq!(key(r#""\ud83d\ude00""#), key("\"\u{1f600}\""));
    assert_eq!(
        key(r#""\"\\\/\b\f\n\r\t""#),
        key(r#""\u0022\u005c/\u0008\u000c\u000a\u000d\u0009""#)
    );
    // An exponent beyond i64 falls back to the literal.
    assert_eq!(key("1e99999999999999999999"), key("1e99999999999999999999"));
    assert_ne!(
        key("1e99999999999999999999"),
        key("10e99999999999999999998")
    );
}

#[test]
fn cancellation_names_its_request_by_raw_value() {
    let note = |params: &str| match classify(
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{params}}}"#)
            .as_bytes(),
    ) {
        Some(Incoming::Notification { request_id, .. }) => request_id,
        other => panic!("{other:?}"),
    };
    let big = request_id(r#"{"jsonrpc":"2.0","id":18446744073709551617,"method":"ping"}"#);
    assert_eq!(
        note(r#"{"requestId":18446744073709551617}"#).as_ref(),
        Some(&big.key())
    );
    assert_ne!(
        note(r#"{"requestId":18446744073709551616}"#).as_ref(),
        Some(&big.key())
    );
    let lone = request_id(r#"{"jsonrpc":"2.0","id":"\ud800","method":"ping"}"#);
    assert_eq!(
        note(r#"{"requestId":"\ud800"}"#).as_ref(),
        Some(&lone.key())
    );
    assert_ne!(
        note(r#"{"requestId":"\ud801"}"#).as_ref(),
        Some(&lone.key())
    );
    assert_eq!(note(r#"{"requestId":null}"#), None);
    assert_eq!(note(r#"{"requestId":{}}"#), None);
    assert_eq!(note(r#"{}"#), None);
}

#[test]
fn lone_surrogates_read_as_replacement_characters() {
    let c = |s: &str| classify(s.as_bytes());
    match c(
        r#"{"jsonrpc":"2.0","id":"\udc00","method":"m\ud800","params":{"k":"a\ud800\ud800b\udbff"}}"#,
    ) {
        Some(Incoming::Request { id, method, params }) => {
            assert_eq!(id.raw(), r#""\udc00""#);
            assert_eq!(method, "m\u{fffd}");
            assert_eq!(params, json!({"k": "a\u{fffd}\u{fffd}b\u{fffd}"}));
        }
        other => panic!("{other:?}"),
    }
    // A pair stays a pair; an escaped backslash is no escape.
    assert_eq!(
        lone_surrogates_replaced(r#""\ud83d\ude00""#),
        r#""\ud83d\ude00""#
    );
    assert_eq!(lone_surrogates_replaced(r#""\\ud800""#), r#""\\ud800""#);
    assert_eq!(
        lone_surrogates_replaced(r#"{"a":"\\","b":"\ud800"}"#),
        r#"{"a":"\\","b":"\uFFFD"}"#
    );
}

#[test]
fn params_that_cannot_be_read_keep_the_request_id() {
    let unreadable = |line: &str| match classify(line.as_bytes()) {
        Some(Incoming::Unreadable { id, method, why }) => (id.raw().to_string(), method, why),
        other => panic!("{other:?}"),
    };
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{{"a":{}1{}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let (id, method, why) = unreadable(&deep);
    assert_eq!((id.as_str(), method.as_str()), ("\"deep\"", "tools/call"));
    assert!(why.contains("recursion limit"), "{why}");
    let huge = r#"{"jsonrpc":"2.0","id":9,"method":"ping","params":{"a":1e400}}"#;
    let (id, _, why) = unreadable(huge);
    assert_eq!(id, "9");
    assert!(why.contains("out of range"), "{why}");
    // A notification cannot be answered with its id: the usual -32600, id null.
    let note = r#"{"jsonrpc":"2.0","method":"n","params":{"a":1e400}}"#;
    assert_eq!(error_of(classify(note.as_bytes())), (-32600, Value::Null));
}
