//! Watch: initial events from `0` and from none vs an exact resourceVersion, bookmarks,
//! sendInitialEvents with the initial-events-end bookmark, an object leaving a label selector
//! (DELETED), timeoutSeconds, and watches of a single object by field selector.
//!
//! Every watch has `timeoutSeconds=1` (the real server then closes it); the requests in
//! `during` run once its answer headers arrived.

use serde_json::json;

use super::{CM, cm, cm_labels};
use crate::exchange::{Area, Request, Script, delete, get, patch, post};

fn w() -> Request {
    get(CM).q("watch", "true").q("timeoutSeconds", "1")
}

/// The watch area.
pub fn area() -> Area {
    let mut s = Script::new("watch");
    s.body("seed", post(CM, cm_labels("a", json!({"w": "1"}))))
        .capture("rv_a", "/metadata/resourceVersion");
    s.setup(post(CM, cm_labels("b", json!({"w": "1"}))));
    s.watch("from-none", w(), vec![]);
    s.watch("from-0", w().q("resourceVersion", "0"), vec![]);
    s.watch("from-exact", w().q("resourceVersion", "{rv_a}"), vec![]);
    s.watch(
        "bookmarks-from-0",
        w().q("resourceVersion", "0")
            .q("allowWatchBookmarks", "true"),
        vec![],
    );
    s.watch(
        "send-initial-events",
        w().q("sendInitialEvents", "true")
            .q("resourceVersionMatch", "NotOlderThan")
            .q("allowWatchBookmarks", "true"),
        vec![],
    );
    s.status(
        "send-initial-events-without-bookmarks",
        w().q("sendInitialEvents", "true")
            .q("resourceVersionMatch", "NotOlderThan"),
    );
    s.status(
        "send-initial-events-bad-match",
        w().q("sendInitialEvents", "true")
            .q("resourceVersionMatch", "Exact")
            .q("allowWatchBookmarks", "true"),
    );
    s.body("list-for-rv", get(CM))
        .capture("list_rv", "/metadata/resourceVersion");
    s.watch(
        "live-events",
        w().q("resourceVersion", "{list_rv}"),
        vec![
            post(CM, cm("live", json!({"x": "1"}))),
            patch(&format!("{CM}/live"), "merge", json!({"data": {"x": "2"}})),
            delete(&format!("{CM}/live")),
        ],
    );
    s.body("list-for-rv-2", get(CM))
        .capture("list_rv2", "/metadata/resourceVersion");
    s.watch(
        "leaves-selector",
        w().q("resourceVersion", "{list_rv2}")
            .q("labelSelector", "w=1"),
        vec![
            patch(
                &format!("{CM}/a"),
                "merge",
                json!({"metadata": {"labels": {"w": "2"}}}),
            ),
            patch(
                &format!("{CM}/a"),
                "merge",
                json!({"metadata": {"labels": {"w": "1"}}}),
            ),
        ],
    );
    s.body("list-for-rv-3", get(CM))
        .capture("list_rv3", "/metadata/resourceVersion");
    s.watch(
        "field-selector-one-object",
        w().q("resourceVersion", "{list_rv3}")
            .q("fieldSelector", "metadata.name=b"),
        vec![
            patch(&format!("{CM}/a"), "merge", json!({"data": {"z": "1"}})),
            patch(&format!("{CM}/b"), "merge", json!({"data": {"z": "1"}})),
        ],
    );
    s.watch(
        "from-none-label-selector",
        w().q("labelSelector", "w=1"),
        vec![],
    );
    s.watch(
        "single-object-path",
        get(&format!("{CM}/b"))
            .q("watch", "true")
            .q("timeoutSeconds", "1"),
        vec![],
    );
    s.watch(
        "cluster-wide-field-selector",
        get("/api/v1/configmaps")
            .q("watch", "true")
            .q("timeoutSeconds", "1")
            .q("fieldSelector", "metadata.namespace={ns}"),
        vec![],
    );
    s.status("bad-selector", w().q("labelSelector", "a in ("));
    s.status("bad-timeout", w().q("timeoutSeconds", "abc"));
    s.done()
}
