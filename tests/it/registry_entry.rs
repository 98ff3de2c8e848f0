//! The MCP registry entry (`server.json`, issue 23 point 10) against the crate it describes and
//! the README the registry reads: name, version and commands agree, the `mcp-name:` line is
//! visible text (crates.io strips HTML comments, where the registry would not find it), and every
//! JSON snippet in the README (the client configurations) parses as written.

use serde_json::Value;

const SERVER_JSON: &str = include_str!("../../server.json");
const README: &str = include_str!("../../README.md");
const CARGO_TOML: &str = include_str!("../../Cargo.toml");

fn entry() -> Value {
    serde_json::from_str(SERVER_JSON).expect("server.json is JSON")
}

/// `key = "value"` of the `[package]` table of Cargo.toml.
fn package_field(key: &str) -> String {
    let package = CARGO_TOML
        .split("\n[")
        .find(|t| t.starts_with("package]") || t.starts_with("[package]"))
        .expect("a [package] table");
    package
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
        })
        .unwrap_or_else(|| panic!("no {key} in [package]"))
}

#[test]
fn server_json_names_this_crate_its_version_and_both_transports() {
    let e = entry();
    let name = e["name"].as_str().unwrap();
    let (namespace, server) = name.split_once('/').expect("namespace/name");
    assert!(
        namespace.starts_with("io.github.") && !server.contains('/'),
        "{name}"
    );
    assert!(
        e["$schema"]
            .as_str()
            .is_some_and(|s| s.starts_with("https://static.modelcontextprotocol.io/schemas/")),
        "{e}"
    );
    let description = e["description"].as_str().unwrap();
    assert!(
        (1..=100).contains(&description.chars().count()),
        "the registry caps descriptions at 100 characters: {description}"
    );
    let version = package_field("version");
    assert_eq!(e["version"], version.as_str());
    let packages = e["packages"].as_array().expect("packages");
    let mut transports = Vec::new();
    for p in packages {
        assert_eq!(p["registryType"], "cargo", "{p}");
        assert_eq!(p["registryBaseUrl"], "https://crates.io", "{p}");
        assert_eq!(p["identifier"], package_field("name").as_str(), "{p}");
        assert_eq!(p["version"], version.as_str(), "{p}");
        let args: Vec<&str> = p["packageArguments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["value"].as_str().or(a["valueHint"].as_str()).unwrap())
            .collect();
        let kind = p["transport"]["type"].as_str().unwrap();
        match kind {
            "stdio" => assert_eq!(args, ["mcp"], "{p}"),
            "streamable-http" => {
                assert_eq!(args, ["mcp", "--http", "addr"], "{p}");
                assert_eq!(p["transport"]["url"], "http://{addr}/mcp", "{p}");
                let env: Vec<&str> = p["environmentVariables"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|v| v["name"].as_str())
                    .collect();
                assert!(env.contains(&"CDP_SUPERVISOR_MCP_TOKEN"), "{p}");
                let auth = &p["transport"]["headers"][0];
                assert_eq!(auth["name"], "Authorization", "{p}");
                assert_eq!(auth["isSecret"], true, "{p}");
            }
            other => panic!("unexpected transport {other}: {p}"),
        }
        transports.push(kind);
    }
    assert_eq!(transports, ["stdio", "streamable-http"]);
}

#[test]
fn readme_carries_the_visible_mcp_name_line_and_snippets_that_parse() {
    let name = entry()["name"].as_str().unwrap().to_string();
    let line = README
        .lines()
        .find(|l| l.contains("mcp-name: "))
        .expect("an mcp-name: line in README.md");
    assert!(
        !line.contains("<!--"),
        "crates.io drops HTML comments: the line must be visible: {line}"
    );
    let after = line.split("mcp-name: ").nth(1).unwrap();
    assert!(
        after.starts_with(&name)
            && after[name.len()..]
                .chars()
                .next()
                .is_none_or(|c| c.is_whitespace() || c == '`' || c == '<'),
        "the token must be followed by a boundary: {line}"
    );
    for (at, _) in README.match_indices("mcp-name: ") {
        assert!(
            README[at + "mcp-name: ".len()..].starts_with(&name),
            "every mcp-name: names {name}"
        );
    }

    let mut snippets = 0;
    let mut rest = README;
    while let Some(start) = rest.find("```json\n") {
        let body = &rest[start + "```json\n".len()..];
        let end = body.find("```").expect("a closed code block");
        let snippet = &body[..end];
        serde_json::from_str::<Value>(snippet)
            .unwrap_or_else(|e| panic!("a README JSON snippet does not parse ({e}):\n{snippet}"));
        snippets += 1;
        rest = &body[end..];
    }
    assert!(snippets >= 6, "the client snippets: {snippets}");
    for needle in [
        "claude mcp add cdp-supervisor -- cdp-supervisor mcp",
        "claude mcp add --transport http cdp-supervisor http://127.0.0.1:8737/mcp",
        ".vscode/mcp.json",
        ".cursor/mcp.json",
        "cargo install --path .",
    ] {
        assert!(README.contains(needle), "README lacks {needle:?}");
    }
}
