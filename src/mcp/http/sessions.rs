//! The legacy (2025-11-25 and older) sessions by `Mcp-Session-Id`, at most [`MAX_SESSIONS`].
//!
//! A new session never ends one in use: when the table is full, the least recently used
//! session is ended only if it has been idle for [`IDLE_BEFORE_EVICTION`] (its client gets 404
//! and initializes again, as 2025-11-25 prescribes); otherwise the `initialize` is refused
//! with 503 and a `Retry-After` of the time until the oldest session reaches that idleness.
//! One client that sends a thousand `initialize`s fills the table and is then refused; the
//! sessions of the others go on.

use crate::sync;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::mcp::engine::LegacySession;
use crate::task_id::random_hex;

/// Legacy sessions kept at once.
pub(super) const MAX_SESSIONS: usize = 1024;

/// How long a session must go unused before a new one may take its place when the table is
/// full (longer than any call: a call in flight counts as a use at its start, and lasts at
/// most 300 s).
pub(super) const IDLE_BEFORE_EVICTION: Duration = Duration::from_secs(600);

/// One legacy (2025-11-25 and older) session.
#[derive(Debug)]
struct Session {
    /// Its channel: its requests' pool keys, its cancellations.
    channel: u64,
    /// What `initialize` negotiated and `logging/setLevel` set.
    legacy: Arc<LegacySession>,
    used: Instant,
}

/// Why no session was started.
#[derive(Debug)]
pub(super) enum NoSession {
    /// Every session is in use; the oldest may be replaced after this.
    Full { retry_after: Duration },
    /// No random id could be made.
    Random(String),
}

/// The legacy sessions by id.
#[derive(Debug, Default)]
pub(super) struct Sessions {
    map: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    /// A new session on `channel`: its id.
    pub(super) fn create(
        &self,
        channel: u64,
        legacy: Arc<LegacySession>,
    ) -> Result<String, NoSession> {
        self.create_at(channel, legacy, Instant::now())
    }

    fn create_at(
        &self,
        channel: u64,
        legacy: Arc<LegacySession>,
        now: Instant,
    ) -> Result<String, NoSession> {
        let id = random_hex(16).map_err(NoSession::Random)?;
        let mut map = sync::lock(&self.map);
        if map.len() >= MAX_SESSIONS {
            let Some((oldest, used)) = map
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(k, s)| (k.clone(), s.used))
            else {
                return Err(NoSession::Full {
                    retry_after: IDLE_BEFORE_EVICTION,
                });
            };
            let idle = now.saturating_duration_since(used);
            if idle < IDLE_BEFORE_EVICTION {
                return Err(NoSession::Full {
                    retry_after: IDLE_BEFORE_EVICTION - idle,
                });
            }
            map.remove(&oldest);
        }
        map.insert(
            id.clone(),
            Session {
                channel,
                legacy,
                used: now,
            },
        );
        Ok(id)
    }

    /// The session's channel and state (and it counts as used now).
    pub(super) fn get(&self, id: &str) -> Option<(u64, Arc<LegacySession>)> {
        self.get_at(id, Instant::now())
    }

    fn get_at(&self, id: &str, now: Instant) -> Option<(u64, Arc<LegacySession>)> {
        let mut map = sync::lock(&self.map);
        let s = map.get_mut(id)?;
        s.used = s.used.max(now);
        Some((s.channel, Arc::clone(&s.legacy)))
    }

    /// Ends the session; its channel when it existed.
    pub(super) fn remove(&self, id: &str) -> Option<u64> {
        sync::lock(&self.map).remove(id).map(|s| s.channel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_ends_only_a_session_idle_long_enough() {
        let sessions = Sessions::default();
        let t0 = Instant::now();
        let legacy = || Arc::new(LegacySession::default());
        let first = sessions.create_at(0, legacy(), t0).unwrap();
        for i in 1..MAX_SESSIONS {
            sessions.create_at(i as u64, legacy(), t0).unwrap();
        }
        // Full, and every session was used just now: refused, with the wait until the
        // oldest may go.
        let later = t0 + Duration::from_secs(60);
        match sessions.create_at(9999, legacy(), later) {
            Err(NoSession::Full { retry_after }) => {
                assert_eq!(retry_after, IDLE_BEFORE_EVICTION - Duration::from_secs(60));
            }
            other => panic!("{other:?}"),
        }
        assert!(sessions.get_at(&first, later).is_some());
        // Once the others have been idle long enough, the least recently used goes (not
        // `first`, used a minute later than they were).
        let idle = t0 + IDLE_BEFORE_EVICTION;
        let new = sessions
            .create_at(9999, legacy(), idle)
            .expect("a session took its place");
        assert!(sessions.get_at(&new, idle).is_some());
        assert!(sessions.get_at(&first, idle).is_some());
        assert_eq!(
            sessions.map.lock().unwrap().len(),
            MAX_SESSIONS,
            "one ended for one started"
        );
    }
}
