//! The vocabulary of what the server tells a client without being asked: the MCP log levels
//! and one [`Event`] of a task (what `notify` detects, `listen` streams and `Engine::tool_call`
//! logs for a request that opted in).

use serde_json::{Value, json};

use crate::mcp::rpc;

/// RFC 5424 severities as MCP names them, least severe first.
pub(crate) const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A severity: an index into [`LEVELS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Level(u8);

impl Level {
    pub(crate) const DEBUG: Level = Level(0);
    pub(crate) const INFO: Level = Level(1);
    pub(crate) const NOTICE: Level = Level(2);
    pub(crate) const WARNING: Level = Level(3);
    pub(crate) const ERROR: Level = Level(4);

    pub(crate) fn parse(name: &str) -> Option<Level> {
        LEVELS
            .iter()
            .position(|l| *l == name)
            .and_then(|i| u8::try_from(i).ok())
            .map(Level)
    }

    pub(crate) fn name(self) -> &'static str {
        LEVELS.get(usize::from(self.0)).copied().unwrap_or("info")
    }

    pub(crate) fn index(self) -> u8 {
        self.0
    }

    /// The level of an index ([`Level::index`]); the most severe one past the end.
    pub(crate) fn from_index(i: u8) -> Level {
        Level(i.min(7))
    }
}

/// Something that happened to a task.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub(crate) level: Level,
    /// `{event, task_id, message, ...}`: the `data` of a `notifications/message`, and the
    /// event of a `notifications/resources/updated`.
    pub(crate) data: Value,
    /// Whether a legacy session hears of it as a `notifications/message` (the start and the
    /// stop of a task on purpose are the agent's own calls: only listeners hear of them).
    pub(crate) logged: bool,
}

impl Event {
    /// Event `event` of `task`, at `level`, saying `message`; [`Event::with`] adds its fields.
    pub(crate) fn new(level: Level, event: &str, task: &str, message: String) -> Event {
        Event {
            level,
            data: json!({"event": event, "task_id": task, "message": message}),
            logged: true,
        }
    }

    /// The event with its field `key` set to `value`.
    pub(crate) fn with(mut self, key: &str, value: impl Into<Value>) -> Event {
        self.data[key] = value.into();
        self
    }

    /// The event, heard by listeners only (not logged to a legacy session).
    pub(crate) fn unlogged(mut self) -> Event {
        self.logged = false;
        self
    }

    /// The `notifications/message` line of this event.
    pub(crate) fn log_line(&self) -> String {
        rpc::notification(
            "notifications/message",
            json!({"level": self.level.name(), "logger": "cdp-supervisor", "data": self.data}),
        )
        .to_string()
    }
}
