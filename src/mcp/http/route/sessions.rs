//! The legacy (2025-11-25 and older) sessions by `Mcp-Session-Id`, at most [`MAX_SESSIONS`].

use super::*;

/// Legacy sessions kept at once; past it the least recently used one is dropped (its client
/// gets 404 and initializes again, as 2025-11-25 prescribes).
const MAX_SESSIONS: usize = 1024;

/// One legacy (2025-11-25 and older) session.
#[derive(Debug)]
struct Session {
    /// Its channel: its requests' pool keys, its cancellations.
    channel: u64,
    /// What `initialize` negotiated and `logging/setLevel` set.
    legacy: Arc<LegacySession>,
    used: Instant,
}

/// The legacy sessions by id.
#[derive(Debug, Default)]
pub(in crate::mcp::http) struct Sessions {
    map: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    pub(super) fn create(
        &self,
        channel: u64,
        legacy: Arc<LegacySession>,
    ) -> Result<String, String> {
        let id = random_hex(16)?;
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(
            id.clone(),
            Session {
                channel,
                legacy,
                used: Instant::now(),
            },
        );
        Ok(id)
    }

    /// The session's channel and state (and it counts as used now).
    pub(super) fn get(&self, id: &str) -> Option<(u64, Arc<LegacySession>)> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let s = map.get_mut(id)?;
        s.used = Instant::now();
        Some((s.channel, Arc::clone(&s.legacy)))
    }

    /// Ends the session; its channel when it existed.
    pub(super) fn remove(&self, id: &str) -> Option<u64> {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
            .map(|s| s.channel)
    }
}
