//! The Rust side of the Python bench (`bindings/python/bench/`): the same dialog-detection loop
//! as the bench's Python side, on the same fake browser and supervisor, run by Rust threads, so
//! the bench prints what the binding adds to the Rust figure in one run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use cdp_supervisor::DialogAction;

use crate::supervisor::PySupervisor;
use crate::testing::PyFakeBrowser;

/// `samples` times: a Rust thread blocks in `sup.wait_for_dialog`; the fake opens an alert
/// (t0 just before); the waiter stamps when `wait_for_dialog` returns; the dialog is answered.
/// Returns the latencies in nanoseconds.
#[pyfunction]
#[pyo3(name = "_bench_detect_rust")]
pub fn detect_rust(
    py: Python<'_>,
    fake: &Bound<'_, PyFakeBrowser>,
    sup: &Bound<'_, PySupervisor>,
    samples: usize,
) -> PyResult<Vec<u64>> {
    sup.get().check_home()?;
    let sup = Arc::clone(&sup.get().sup);
    let fake = fake.get();
    let err = |m: &str| PyRuntimeError::new_err(m.to_string());
    py.detach(|| {
        fake.with(|fb| {
            let (ready_tx, ready_rx) = bounded::<()>(0);
            let (seen_tx, seen_rx) = bounded::<(String, Instant)>(1);
            std::thread::scope(|s| {
                let waiter_sup = Arc::clone(&sup);
                s.spawn(move || {
                    for _ in 0..samples {
                        if ready_tx.send(()).is_err() {
                            return;
                        }
                        let Some(d) = waiter_sup.wait_for_dialog(Duration::from_secs(5)) else {
                            return;
                        };
                        let seen = Instant::now();
                        if seen_tx.send((d.id, seen)).is_err() {
                            return;
                        }
                    }
                });
                let mut out = Vec::with_capacity(samples);
                for _ in 0..samples {
                    ready_rx
                        .recv_timeout(Duration::from_secs(5))
                        .map_err(|_| err("the waiter thread did not get ready"))?;
                    std::thread::sleep(Duration::from_micros(300));
                    let t0 = Instant::now();
                    fb.open_dialog("alert", "bench", "");
                    let (id, seen) = seen_rx
                        .recv_timeout(Duration::from_secs(5))
                        .map_err(|_| err("the dialog was not seen"))?;
                    out.push(seen.saturating_duration_since(t0).as_nanos() as u64);
                    sup.respond_to_dialog(DialogAction::Dismiss, None, Some(&id))
                        .map_err(|e| err(&e.to_string()))?;
                }
                Ok(out)
            })
        })?
    })
}
