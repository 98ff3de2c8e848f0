//! Snapshot reads allocate nothing: a counting global allocator (per thread) watches millions of
//! reads through every read path while the reader thread publishes 500+ new snapshots.
//!
//! The allocator below is the global allocator of the whole `tests/it` binary. It counts in a
//! thread-local, and only this test's reading thread is measured, so the tests running beside
//! it in the process do not count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{Config, SupervisorRegistry};
use serde_json::json;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: delegates to the system allocator; the counter is a plain thread-local.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCS.with(Cell::get)
}

#[test]
fn snapshot_reads_allocate_nothing_while_the_writer_publishes() {
    let fake = FakeBrowser::start().unwrap();
    let reg = SupervisorRegistry::new(Config::default());
    let sup = reg.get_or_start("alloc", &fake.ws_url()).unwrap();
    fake.open_dialog("alert", "keep one pending", "");
    sup.wait_for_dialog(Duration::from_secs(5)).unwrap();
    // A writer that keeps the reader thread publishing new snapshots.
    let stop = Arc::new(AtomicBool::new(false));
    let fake = Arc::new(fake);
    // Paced: each event waits for its publish, so every event is one new snapshot (a flood would
    // be applied in large batches with few publishes).
    let writer = {
        let (stop, fake, sup) = (Arc::clone(&stop), Arc::clone(&fake), Arc::clone(&sup));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) && i < 200_000 {
                let v = sup.with_snapshot(|s| s.version);
                fake.emit_on_page(
                    "Runtime.consoleAPICalled",
                    json!({"type": "error", "args": [{"type": "string", "value": format!("e{i}")}]}),
                );
                sup.wait_for(Duration::from_secs(1), |s| s.version > v);
                i += 1;
            }
        })
    };
    // A second task: alternating between the two misses the per-thread read cache on every
    // read, so the refill path is measured too.
    let other = reg.get_or_start("alloc-other", &fake.ws_url()).unwrap();
    let v0 = sup.snapshot().version;
    // Warm up: arc-swap registers this thread's debt slots on first use.
    for _ in 0..100 {
        std::hint::black_box(reg.snapshot("alloc").map(|s| s.pending_dialogs.len()));
    }
    let before = allocations();
    let mut total = 0usize;
    let mut reads = 0usize;
    // Generous: the other tests of the binary compete for the cores; the loop ends at 500.
    let deadline = std::time::Instant::now()
        .checked_add(Duration::from_secs(20))
        .expect("a deadline within range");
    // Read until the writer has published plenty of new snapshots under our feet.
    while sup.with_snapshot(|s| s.version) - v0 < 500 && std::time::Instant::now() < deadline {
        for _ in 0..1000 {
            total += reg.snapshot("alloc").map_or(0, |s| s.pending_dialogs.len());
            total += reg
                .with_snapshot("alloc", |s| s.pending_dialogs.len())
                .unwrap_or(0);
            total += sup.snapshot().pending_dialogs.len();
            total += sup.with_snapshot(|s| s.frame_tree.children.len() + s.pending_dialogs.len());
            total += reg
                .snapshot("alloc-other")
                .map_or(1, |s| s.pending_dialogs.len() + 1);
            total += reg.snapshot("alloc").map_or(0, |s| s.pending_dialogs.len());
            total += usize::from(reg.snapshot("no-such-task").is_none());
        }
        reads += 7000;
    }
    let after = allocations();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let published = sup.snapshot().version - v0;
    eprintln!(
        "{reads} reads, {} allocations, while {published} snapshots were published",
        after - before
    );
    assert_eq!(total, reads, "every read saw the pending dialog");
    assert!(
        published >= 500,
        "the writer published too little ({published})"
    );
    assert_eq!(after - before, 0, "the read path allocated");
    drop(other);
    reg.stop_all();
}
