//! Many starts at once on one browser (issue 24 point 4): none fails, none waits for another's
//! attach, and each task gets its own supervisor and page. (How long they take against starts one
//! after another is measured by `cargo bench --bench fleet`, not here.)

use cdp_supervisor::StartRequest;
use std::collections::HashSet;
use std::sync::{Arc, Barrier};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{Config, StartOptions, SupervisorRegistry};

const STARTS: usize = 100;

#[test]
fn a_hundred_concurrent_starts_on_one_browser_all_succeed_each_on_its_own_page() {
    let fake = FakeBrowser::start().expect("fake browser");
    fake.set_auto_attach_pages(true);
    let url = fake.ws_url();
    let reg = Arc::new(SupervisorRegistry::new(Config::default()));
    let gate = Arc::new(Barrier::new(STARTS));
    let threads: Vec<_> = (0..STARTS)
        .map(|i| {
            let (reg, gate, url) = (Arc::clone(&reg), Arc::clone(&gate), url.clone());
            std::thread::spawn(move || {
                gate.wait();
                let sup = reg.start(
                    StartRequest::new(&format!("burst-{i}"), &url)
                        .with_options(StartOptions::default().with_new_page(true)),
                )?;
                Ok::<_, cdp_supervisor::Error>(sup.snapshot().page_target_id.clone())
            })
        })
        .collect();
    let pages: Vec<Option<String>> = threads
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            t.join()
                .expect("start thread")
                .unwrap_or_else(|e| panic!("start {i} failed: {e}"))
        })
        .collect();
    let distinct: HashSet<&String> = pages.iter().flatten().collect();
    assert_eq!(distinct.len(), STARTS, "{pages:?}");
    assert_eq!(reg.tasks().len(), STARTS);
    assert!(
        (0..STARTS).all(|i| reg
            .get(&format!("burst-{i}"))
            .is_some_and(|s| s.is_active())),
        "every task is active"
    );
    reg.stop_all();
    assert!(reg.tasks().is_empty());
}
