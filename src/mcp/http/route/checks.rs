//! What a request's headers must say: the `Accept` it needs, and the 2026-07-28 mirrored
//! headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) against its body.

use super::*;

/// Whether an `Accept` value admits JSON or an event stream (absent: anything goes).
pub(super) fn accepts_ours(head: &Head) -> bool {
    head.text("accept").is_none_or(|a| {
        a.split(',').any(|t| {
            let t = t
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            matches!(
                t.as_str(),
                "application/json" | "text/event-stream" | "application/*" | "text/*" | "*/*"
            )
        })
    })
}

/// The protocol version a request's `_meta` names (`Some(None)`: `_meta` has the key but it is
/// no string).
pub(super) fn meta_version(params: &Value) -> Option<Option<&str>> {
    params.get("_meta")?.get(META_VERSION).map(|v| v.as_str())
}

/// Checks the headers a 2026-07-28 request mirrors from its body.
pub(super) fn mirrored_headers_match(
    head: &Head,
    method: &str,
    params: &Value,
) -> Result<(), String> {
    for name in ["mcp-protocol-version", "mcp-method", "mcp-name"] {
        if head.count(name) > 1 {
            return Err(format!("{name} is sent more than once"));
        }
    }
    let header_version = head.text("mcp-protocol-version");
    match (meta_version(params), header_version) {
        (_, None) => return Err("the MCP-Protocol-Version header is missing".into()),
        (Some(Some(body)), Some(h)) if body != h => {
            return Err(format!(
                "MCP-Protocol-Version {} does not match params._meta's {}",
                quoted(h),
                quoted(body)
            ));
        }
        _ => {}
    }
    match head.text("mcp-method") {
        None => return Err("the Mcp-Method header is missing".into()),
        Some(m) if m != method => {
            return Err(format!(
                "Mcp-Method {} does not match the method {}",
                quoted(m),
                quoted(method)
            ));
        }
        Some(_) => {}
    }
    let named = match method {
        "tools/call" | "prompts/get" => params.get("name"),
        "resources/read" => params.get("uri"),
        _ => None,
    };
    if let Some(body_name) = named.and_then(Value::as_str) {
        match head.text("mcp-name").map(decode_header_value) {
            None => return Err("the Mcp-Name header is missing".into()),
            Some(Some(h)) if h == body_name => {}
            Some(_) => {
                return Err(format!(
                    "Mcp-Name does not match the request's name {}",
                    quoted(body_name)
                ));
            }
        }
    }
    Ok(())
}

/// A header value as 2026-07-28 encodes it: as is, or `=?base64?...?=` (`None`: a broken
/// encoding, which matches nothing).
pub(super) fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine;
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        None => Some(value.to_string()),
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
    }
}
