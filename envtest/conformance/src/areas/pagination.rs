//! Pagination: limit, continue, an expired or garbage continue token, remainingItemCount.

use serde_json::json;

use super::{CM, cm};
use crate::exchange::{Area, Script, get};

/// The pagination area.
pub fn area() -> Area {
    let mut s = Script::new("pagination");
    for i in 0..5 {
        s.setup(crate::exchange::post(
            CM,
            cm(&format!("c{i}"), json!({"i": i.to_string()})),
        ));
    }
    let page = &[
        "/kind",
        "/items/*/metadata/name",
        "/metadata/remainingItemCount",
        "/metadata/continue",
    ];
    s.pick("limit-2", get(CM).q("limit", "2"), page)
        .capture("c1", "/metadata/continue");
    s.pick(
        "continue-1",
        get(CM).q("limit", "2").q("continue", "{c1}"),
        page,
    )
    .capture("c2", "/metadata/continue");
    s.pick(
        "continue-2",
        get(CM).q("limit", "2").q("continue", "{c2}"),
        page,
    );
    s.pick("limit-0", get(CM).q("limit", "0"), page);
    s.pick("limit-5", get(CM).q("limit", "5"), page);
    s.pick("limit-10", get(CM).q("limit", "10"), page);
    s.pick(
        "limit-with-selector",
        get(CM)
            .q("limit", "1")
            .q("fieldSelector", "metadata.name!=c0"),
        page,
    );
    s.status(
        "continue-garbage",
        get(CM).q("limit", "2").q("continue", "garbage"),
    );
    s.status(
        "continue-expired",
        get(CM).q("limit", "2").q(
            "continue",
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6Miwic3RhcnQiOiJjMVx1MDAwMCJ9",
        ),
    );
    s.status(
        "continue-with-rv",
        get(CM)
            .q("limit", "2")
            .q("continue", "{c1}")
            .q("resourceVersion", "0"),
    );
    s.pick(
        "limit-rv0",
        get(CM).q("limit", "2").q("resourceVersion", "0"),
        &["/kind", "/items/*/metadata/name"],
    );
    s.done()
}
