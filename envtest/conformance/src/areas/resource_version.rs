//! resourceVersion on get and list: unset, `0`, exact, NotOlderThan, too old (410) and in the
//! future; updates with a stale, a current and no resourceVersion.

use serde_json::json;

use super::{CM, cm};
use crate::exchange::{Area, Script, get, post, put};

/// The resource_version area.
pub fn area() -> Area {
    let mut s = Script::new("resource_version");
    s.body("create", post(CM, cm("c1", json!({"a": "1"}))))
        .capture("rv1", "/metadata/resourceVersion");
    s.body(
        "update",
        put(&format!("{CM}/c1"), cm("c1", json!({"a": "2"}))),
    )
    .capture("rv2", "/metadata/resourceVersion");
    let item = format!("{CM}/c1");
    let list = &[
        "/kind",
        "/items/*/metadata/name",
        "/items/*/metadata/resourceVersion",
        "/items/*/data",
    ];
    s.body("get-unset", get(&item));
    s.body("get-0", get(&item).q("resourceVersion", "0"));
    s.body("get-exact-old", get(&item).q("resourceVersion", "{rv1}"));
    s.status("get-future", get(&item).q("resourceVersion", "999999999"));
    s.status("get-garbage", get(&item).q("resourceVersion", "abc"));
    s.pick("list-unset", get(CM), list);
    s.pick("list-0", get(CM).q("resourceVersion", "0"), list);
    s.pick(
        "list-notolderthan",
        get(CM)
            .q("resourceVersion", "{rv2}")
            .q("resourceVersionMatch", "NotOlderThan"),
        list,
    );
    s.pick(
        "list-exact-current",
        get(CM)
            .q("resourceVersion", "{rv2}")
            .q("resourceVersionMatch", "Exact"),
        list,
    );
    s.pick(
        "list-exact-old",
        get(CM)
            .q("resourceVersion", "{rv1}")
            .q("resourceVersionMatch", "Exact"),
        list,
    );
    s.status(
        "list-exact-too-old",
        get(CM)
            .q("resourceVersion", "2")
            .q("resourceVersionMatch", "Exact"),
    );
    s.status("list-future", get(CM).q("resourceVersion", "999999999"));
    s.status(
        "list-match-without-rv",
        get(CM).q("resourceVersionMatch", "Exact"),
    );
    s.status(
        "list-match-bad",
        get(CM)
            .q("resourceVersion", "{rv2}")
            .q("resourceVersionMatch", "Sometimes"),
    );
    s.status(
        "watch-too-old",
        get(CM)
            .q("watch", "true")
            .q("resourceVersion", "2")
            .q("timeoutSeconds", "1"),
    );
    s.status(
        "update-stale",
        put(&item, {
            let mut c = cm("c1", json!({"a": "3"}));
            c["metadata"]["resourceVersion"] = json!("{rv1}");
            c
        }),
    );
    s.pick(
        "update-current",
        put(&item, {
            let mut c = cm("c1", json!({"a": "3"}));
            c["metadata"]["resourceVersion"] = json!("{rv2}");
            c
        }),
        &["/data", "/metadata/resourceVersion"],
    )
    .capture("rv3", "/metadata/resourceVersion");
    s.pick(
        "update-noop",
        put(&item, cm("c1", json!({"a": "3"}))),
        &["/metadata/resourceVersion"],
    );
    s.status(
        "update-garbage-rv",
        put(&item, {
            let mut c = cm("c1", json!({"a": "4"}));
            c["metadata"]["resourceVersion"] = json!("x");
            c
        }),
    );
    s.done()
}
