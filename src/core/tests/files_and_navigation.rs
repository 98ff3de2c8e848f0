//! Files and navigation (issue 31): downloads, file choosers, loader ids, replaced pages.

use super::*;

// --- issue 31: files, navigation

fn with_files(dir: &str, answer_choosers: bool) -> Sim {
    let mut sim = Sim::new(settings(DialogPolicy::MustRespond, BridgeMode::Off));
    sim.core.set_files(FilesSettings {
        download_dir: Some(dir.into()),
        download_behavior: Some(json!({"behavior": "allowAndName", "downloadPath": dir})),
        answer_file_choosers: answer_choosers,
    });
    let attach = sim.register(
        "Target.attachToTarget",
        None,
        CallKind::AttachPage {
            target_id: PAGE.into(),
        },
    );
    sim.reply(attach, json!({"sessionId": S1}));
    sim.event(
        Some(S1),
        "Page.frameNavigated",
        json!({"frame": {"id": PAGE, "url": "http://a.test/", "loaderId": "L0",
                         "securityOrigin": "http://a.test"}}),
    );
    sim
}

#[test]
fn the_page_attached_tells_the_browser_where_the_tasks_downloads_go() {
    let mut sim = with_files("/dl/task", false);
    let out = sim.step();
    let (_, c) = out.only("Browser.setDownloadBehavior");
    assert_eq!(c.session_id, None, "browser-level");
    assert_eq!(c.params["downloadPath"], "/dl/task");
}

#[test]
fn a_download_of_the_tasks_page_is_followed_and_moved_into_its_directory() {
    let mut sim = with_files("/dl/task", false);
    sim.step();
    // Another task's download (a frame this task does not have): not ours.
    sim.event(
        None,
        "Browser.downloadWillBegin",
        json!({"frameId": "OTHER", "guid": "G0", "url": "http://b.test/x", "suggestedFilename": "x"}),
    );
    sim.event(
        Some(S1),
        "Page.downloadWillBegin",
        json!({"frameId": PAGE, "guid": "G1", "url": "http://a.test/f", "suggestedFilename": "../report.txt"}),
    );
    sim.event(
        None,
        "Browser.downloadWillBegin",
        json!({"frameId": PAGE, "guid": "G1", "url": "http://a.test/f", "suggestedFilename": "../report.txt"}),
    );
    let s = sim.snap();
    assert_eq!(s.downloads.len(), 1, "{:?}", s.downloads);
    assert_eq!(s.downloads[0].state, DownloadState::InProgress);
    sim.event(
        None,
        "Browser.downloadProgress",
        json!({"guid": "G1", "totalBytes": 10, "receivedBytes": 4, "state": "inProgress"}),
    );
    assert_eq!(sim.snap().downloads[0].received_bytes, 4);
    // The page-level "completed" comes first and does not say where the file is.
    sim.event(
        Some(S1),
        "Page.downloadProgress",
        json!({"guid": "G1", "totalBytes": 10, "receivedBytes": 10, "state": "completed"}),
    );
    assert_eq!(sim.snap().downloads[0].state, DownloadState::InProgress);
    sim.event(
        None,
        "Browser.downloadProgress",
        json!({"guid": "G1", "totalBytes": 10, "receivedBytes": 10, "state": "completed",
               "filePath": "/dl/other-task/G1"}),
    );
    let out = sim.step();
    let to = std::path::PathBuf::from("/dl/task/report.txt");
    assert_eq!(
        out.moves,
        [("G1".to_string(), "/dl/other-task/G1".into(), to.clone())]
    );
    let d = sim.snap().downloads[0].clone();
    assert_eq!(d.state, DownloadState::Completed);
    assert_eq!(d.path.as_deref(), Some(to.as_path()));
    assert_eq!((d.received_bytes, d.total_bytes), (10, Some(10)));
    // A second file of the same name gets a name of its own; a failed move keeps where the
    // browser wrote it.
    sim.event(
        Some(S1),
        "Page.downloadWillBegin",
        json!({"frameId": PAGE, "guid": "G2", "url": "u", "suggestedFilename": "report.txt"}),
    );
    sim.event(
        None,
        "Browser.downloadProgress",
        json!({"guid": "G2", "receivedBytes": 3, "state": "completed", "filePath": "/dl/task/G2"}),
    );
    let out = sim.step();
    assert_eq!(
        out.moves[0].2,
        std::path::PathBuf::from("/dl/task/report (1).txt")
    );
    sim.core
        .download_move_failed("G2", std::path::Path::new("/dl/task/G2"), "EXDEV");
    let d = sim.snap().downloads[1].clone();
    assert_eq!(d.path.as_deref(), Some(std::path::Path::new("/dl/task/G2")));
    // A cancelled one says so, and stays cancelled.
    sim.event(
        Some(S1),
        "Page.downloadWillBegin",
        json!({"frameId": PAGE, "guid": "G3", "url": "u", "suggestedFilename": "big.bin"}),
    );
    sim.event(
        None,
        "Browser.downloadProgress",
        json!({"guid": "G3", "receivedBytes": 5, "state": "canceled"}),
    );
    sim.event(
        None,
        "Browser.downloadProgress",
        json!({"guid": "G3", "receivedBytes": 9, "state": "inProgress"}),
    );
    let d = sim.snap().downloads[2].clone();
    assert_eq!(
        (d.state, d.received_bytes, d.path.clone()),
        (DownloadState::Canceled, 5, None)
    );
    assert_eq!(
        sim.snap().to_json()["downloads"][2],
        json!({"guid": "G3", "url": "u", "suggested_filename": "big.bin", "state": "canceled",
               "received_bytes": 5})
    );
}

#[test]
fn a_file_chooser_is_pending_with_file_access_and_refused_without() {
    for answerable in [true, false] {
        let mut sim = with_files("/dl/t", answerable);
        sim.step();
        sim.event(
            Some(S1),
            "Page.fileChooserOpened",
            json!({"frameId": PAGE, "mode": "selectMultiple", "backendNodeId": 42}),
        );
        let s = sim.snap();
        let j = s.to_json();
        if answerable {
            assert_eq!(s.file_choosers.len(), 1);
            let c = &s.file_choosers[0];
            assert_eq!(
                (c.id.as_str(), c.mode, c.backend_node_id),
                ("fc-1", ChooserMode::Multiple, 42)
            );
            assert_eq!(c.target_id, PAGE);
            assert!(
                s.pending_dialogs.is_empty(),
                "not a dialog: it blocks nothing"
            );
            let entry = &j["pending_dialogs"][0];
            assert_eq!(entry["type"], "file_chooser");
            assert_eq!(entry["mode"], "multiple");
            assert_eq!(entry["backend_node_id"], 42);
            assert!(j.get("file_chooser_refused").is_none());
            // Answered: gone.
            let done = sim.register(
                "DOM.setFileInputFiles",
                Some(S1),
                CallKind::ChooserDone { id: "fc-1".into() },
            );
            sim.reply(done, json!({}));
            assert!(sim.snap().file_choosers.is_empty());
            // A new document of its frame takes a pending chooser with it.
            sim.event(
                Some(S1),
                "Page.fileChooserOpened",
                json!({"frameId": PAGE, "mode": "selectSingle", "backendNodeId": 7}),
            );
            assert_eq!(sim.snap().file_choosers[0].id, "fc-2");
            sim.event(
                Some(S1),
                "Page.frameNavigated",
                json!({"frame": {"id": PAGE, "url": "http://a.test/2", "loaderId": "L9", "securityOrigin": "http://a.test"}}),
            );
            assert!(sim.snap().file_choosers.is_empty());
        } else {
            assert!(s.file_choosers.is_empty());
            let r = s.file_chooser_refused.clone().expect("refused");
            assert_eq!((r.mode, r.count), (ChooserMode::Multiple, 1));
            assert!(j["pending_dialogs"].as_array().unwrap().is_empty());
            assert_eq!(
                j["file_chooser_refused"]["option"],
                "security.allow_file_access"
            );
            assert!(
                j["file_chooser_refused"]["hint"]
                    .as_str()
                    .unwrap()
                    .contains("allow_file_access = true"),
                "{j}"
            );
        }
    }
}

#[test]
fn the_main_documents_loader_and_load_are_published_for_navigations() {
    let mut sim = with_files("/dl/t", false);
    sim.step();
    assert_eq!(
        sim.snap().document,
        Some(crate::snapshot::MainDocument {
            loader_id: "L0".into(),
            loaded: false
        })
    );
    // An OOPIF's load is not the page's.
    sim.event(
        Some("OTHER"),
        "Page.loadEventFired",
        json!({"timestamp": 1.0}),
    );
    assert!(!sim.snap().document.unwrap().loaded);
    sim.event(Some(S1), "Page.loadEventFired", json!({"timestamp": 1.0}));
    assert!(sim.snap().document.unwrap().loaded);
    // A child frame's navigation is not the page's document.
    sim.event(
        Some(S1),
        "Page.frameNavigated",
        json!({"frame": {"id": "CHILD", "parentId": PAGE, "url": "http://a.test/c", "loaderId": "LC"}}),
    );
    assert_eq!(sim.snap().document.unwrap().loader_id, "L0");
    sim.event(
        Some(S1),
        "Page.frameNavigated",
        json!({"frame": {"id": PAGE, "url": "http://a.test/n", "loaderId": "L1"}}),
    );
    assert_eq!(
        sim.snap().document,
        Some(crate::snapshot::MainDocument {
            loader_id: "L1".into(),
            loaded: false
        })
    );
}

#[test]
fn a_new_page_after_a_reconnect_is_reported_as_a_replacement() {
    let mut sim = Sim::must_respond();
    assert!(sim.snap().page_replaced.is_none());
    sim.core.on_disconnect("dropped", sim.now);
    sim.core.reconnecting(1, 3);
    assert_eq!(sim.core.reset_for_reconnect().as_deref(), Some(PAGE));
    // The same page again: nothing to report.
    let attach = sim.register(
        "Target.attachToTarget",
        None,
        CallKind::AttachPage {
            target_id: PAGE.into(),
        },
    );
    sim.reply(attach, json!({"sessionId": "S2"}));
    assert!(sim.snap().page_replaced.is_none());
    sim.core.on_disconnect("dropped", sim.now);
    sim.core.reconnecting(1, 3);
    sim.core.reset_for_reconnect();
    let attach = sim.register(
        "Target.attachToTarget",
        None,
        CallKind::AttachPage {
            target_id: "NEW".into(),
        },
    );
    sim.reply(attach, json!({"sessionId": "S3"}));
    let s = sim.snap();
    assert_eq!(s.page_replaced.as_deref(), Some(PAGE));
    assert_eq!(s.page_target_id.as_deref(), Some("NEW"));
    assert_eq!(s.to_json()["page_replaced"]["old_target_id"], PAGE);
    assert!(s.is_active());
}

#[test]
fn page_titles_come_from_the_browser_at_attach_and_after_each_load() {
    let mut sim = Sim::new(CoreSettings {
        follow_popups: true,
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    let attach = sim.register(
        "Target.attachToTarget",
        None,
        CallKind::AttachPage {
            target_id: PAGE.into(),
        },
    );
    sim.reply(attach, json!({"sessionId": S1}));
    let out = sim.step();
    // Asked at attach, browser-level (a dialog never blocks it).
    let (ask, c) = out.only("Target.getTargetInfo");
    assert_eq!(c.session_id, None);
    assert_eq!(c.params, json!({"targetId": PAGE}));
    sim.frame_navigated(S1, PAGE, None, "http://a.test/");
    let title = |sim: &mut Sim| sim.snap().pages[0].title.clone();
    assert_eq!(title(&mut sim), "");
    sim.reply(
        ask,
        json!({"targetInfo": {"targetId": PAGE, "type": "page", "title": "Checkout",
                              "url": "http://a.test/"}}),
    );
    assert_eq!(title(&mut sim), "Checkout");

    // A new document: its old title no longer applies; after its load it is asked again.
    sim.frame_navigated(S1, PAGE, None, "http://a.test/receipt");
    assert_eq!(title(&mut sim), "");
    assert!(
        !sim.step()
            .methods()
            .iter()
            .any(|(m, _)| *m == "Target.getTargetInfo"),
        "nothing asked before the load"
    );
    sim.event(Some(S1), "Page.loadEventFired", json!({"timestamp": 2.0}));
    let out = sim.step();
    let (ask, _) = out.only("Target.getTargetInfo");
    // A title is page-controlled: clipped, and anything but a string is no title.
    let long = "Receipt <img src=x onerror=alert(1)>".to_string() + &"x".repeat(5000);
    sim.reply(
        ask,
        json!({"targetInfo": {"targetId": PAGE, "title": long}}),
    );
    let got = title(&mut sim);
    assert!(
        got.starts_with("Receipt <img src=x onerror=alert(1)>"),
        "{got}"
    );
    assert!(got.len() < 1100, "clipped: {} bytes", got.len());
    sim.event(Some(S1), "Page.loadEventFired", json!({"timestamp": 3.0}));
    let out = sim.step();
    let (ask, _) = out.only("Target.getTargetInfo");
    sim.reply(ask, json!({"targetInfo": {"title": 7}}));
    assert_eq!(title(&mut sim), got, "kept");
    // The browser may refuse (the target is gone): nothing changes, nothing is delivered.
    sim.event(Some(S1), "Page.loadEventFired", json!({"timestamp": 4.0}));
    let out = sim.step();
    let (ask, _) = out.only("Target.getTargetInfo");
    sim.error(ask, "No target with given id found");
    assert_eq!(title(&mut sim), got);

    // A followed popup's title is asked at its attach and after its loads.
    sim.event(
        None,
        "Target.attachedToTarget",
        json!({"sessionId": "P1", "waitingForDebugger": true,
               "targetInfo": {"targetId": "POP", "type": "page", "url": "about:blank",
                              "openerId": PAGE, "title": "about:blank"}}),
    );
    let out = sim.step();
    let (ask, c) = out.only("Target.getTargetInfo");
    assert_eq!(c.params, json!({"targetId": "POP"}));
    sim.reply(
        ask,
        json!({"targetInfo": {"targetId": "POP", "title": "Pay"}}),
    );
    let snap = sim.snap();
    assert_eq!(snap.pages[1].target_id, "POP");
    assert_eq!(snap.pages[1].title, "Pay");
    assert_eq!(snap.pages[0].title, got, "the task's page keeps its own");
    // An iframe's load is no page's: nothing asked.
    sim.oopif(S1, "S2", "CHILD", PAGE);
    sim.event(Some("S2"), "Page.loadEventFired", json!({"timestamp": 5.0}));
    assert!(
        !sim.step()
            .methods()
            .iter()
            .any(|(m, _)| *m == "Target.getTargetInfo"),
    );
}

#[test]
fn without_follow_popups_no_title_is_asked_for() {
    let mut sim = Sim::must_respond();
    sim.event(Some(S1), "Page.loadEventFired", json!({"timestamp": 1.0}));
    assert!(sim.step().commands.is_empty());
    assert!(sim.snap().pages.is_empty(), "pages are not published");
}
