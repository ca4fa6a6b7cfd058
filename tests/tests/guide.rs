//! The guide's code blocks (`docs/guide/src/*.md`) are copies of compiled, tested code: a block
//! preceded by `<!-- include: <path>:<anchor> -->` must equal the lines between
//! `// ANCHOR: <anchor>` and `// ANCHOR_END: <anchor>` in that file (relative to the workspace
//! root). A snippet that drifts from the code, or code that no longer compiles, fails here or
//! in that file's own build.
//!
//! `KCR_GUIDE_UPDATE=1 cargo test -p kcr-tests --test guide` rewrites the blocks from the code.

use std::path::{Path, PathBuf};

const MARKER: &str = "<!-- include: ";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The lines of `file` between its `ANCHOR: name` and `ANCHOR_END: name` markers.
fn anchored(file: &Path, name: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let start = format!("// ANCHOR: {name}");
    let end = format!("// ANCHOR_END: {name}");
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.trim() == start {
            inside = true;
        } else if line.trim() == end {
            return Ok(out.join("\n"));
        } else if inside && !line.trim_start().starts_with("// ANCHOR") {
            out.push(line);
        }
    }
    Err(format!(
        "{} has no region {start} ... {end}",
        file.display()
    ))
}

/// Checks (or, with `update`, rewrites) every include block of `page`; returns the problems.
fn check_page(page: &Path, update: bool) -> Vec<String> {
    let text = std::fs::read_to_string(page).expect("a readable guide page");
    let lines: Vec<&str> = text.lines().collect();
    let mut problems = Vec::new();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        out.push(line.to_string());
        let Some(spec) = line
            .trim()
            .strip_prefix(MARKER)
            .and_then(|s| s.strip_suffix("-->"))
        else {
            i += 1;
            continue;
        };
        let where_ = format!("{}:{}", page.display(), i + 1);
        let Some((file, anchor)) = spec.trim().rsplit_once(':') else {
            problems.push(format!(
                "{where_}: expected `<path>:<anchor>`, got {spec:?}"
            ));
            i += 1;
            continue;
        };
        let fence = lines.get(i + 1).copied().unwrap_or_default();
        if !fence.starts_with("```") {
            problems.push(format!(
                "{where_}: the include marker is not followed by a code block"
            ));
            i += 1;
            continue;
        }
        let Some(len) = lines[i + 2..].iter().position(|l| l.starts_with("```")) else {
            problems.push(format!("{where_}: the code block never ends"));
            break;
        };
        let block = lines[i + 2..i + 2 + len].join("\n");
        match anchored(&root().join(file), anchor) {
            Err(e) => problems.push(format!("{where_}: {e}")),
            Ok(code) if code == block => {}
            Ok(_) if update => {}
            Ok(_) => problems.push(format!(
                "{where_}: the block differs from {file}:{anchor} \
                 (KCR_GUIDE_UPDATE=1 cargo test -p kcr-tests --test guide rewrites it)"
            )),
        }
        out.push(fence.to_string());
        match (update, anchored(&root().join(file), anchor)) {
            // `split`, not `lines`: a region that ends in a blank line keeps it, as the check reads it.
            (true, Ok(code)) => out.extend(code.split('\n').map(str::to_string)),
            _ => out.extend(lines[i + 2..i + 2 + len].iter().map(|l| l.to_string())),
        }
        out.push(lines[i + 2 + len].to_string());
        i += len + 3;
    }
    if update {
        let mut new = out.join("\n");
        new.push('\n');
        if new != text {
            std::fs::write(page, new).expect("the guide page is writable");
        }
    }
    problems
}

fn pages() -> Vec<PathBuf> {
    let mut pages = Vec::new();
    collect_pages(&root().join("docs/guide/src"), &mut pages);
    pages.sort();
    pages
}

/// Every `.md` file below `dir`, sub-folders (chapters) included.
fn collect_pages(dir: &Path, pages: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for path in entries.filter_map(Result::ok).map(|e| e.path()) {
        if path.is_dir() {
            collect_pages(&path, pages);
        } else if path.extension().is_some_and(|x| x == "md") {
            pages.push(path);
        }
    }
}

#[test]
fn every_guide_snippet_is_the_compiled_code() {
    let update = std::env::var_os("KCR_GUIDE_UPDATE").is_some_and(|v| v == "1");
    let mut problems = Vec::new();
    let mut includes = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        includes += text
            .lines()
            .filter(|l| l.trim().starts_with(MARKER))
            .count();
        problems.extend(check_page(&page, update));
    }
    assert!(includes > 0, "the guide includes no compiled code");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_drifted_snippet_and_a_missing_anchor_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let code = dir.path().join("code.rs");
    std::fs::write(&code, "// ANCHOR: a\nfn a() {}\n// ANCHOR_END: a\n").unwrap();
    let page = dir.path().join("page.md");
    let rel = |p: &Path| p.display().to_string();
    std::fs::write(
        &page,
        format!(
            "<!-- include: {}:a -->\n```rust\nfn a() {{}}\n```\n\n<!-- include: {}:b -->\n```rust\n```\n\n<!-- include: {}:a -->\n```rust\nfn b() {{}}\n```\n",
            rel(&code), rel(&code), rel(&code)
        ),
    )
    .unwrap();
    // Absolute paths: root().join(abs) is abs.
    let problems = check_page(&page, false);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].contains("has no region // ANCHOR: b"),
        "{problems:?}"
    );
    assert!(problems[1].contains("differs"), "{problems:?}");
    // Update rewrites the drifted block; then nothing is wrong but the missing anchor.
    check_page(&page, true);
    let problems = check_page(&page, false);
    assert_eq!(problems.len(), 1, "{problems:?}");
}

#[test]
fn a_region_ending_in_a_blank_line_survives_an_update() {
    let dir = tempfile::tempdir().unwrap();
    let code = dir.path().join("code.rs");
    std::fs::write(
        &code,
        "// ANCHOR: a\nfn a() {}\n\n// ANCHOR_END: a\n// ANCHOR: b\nfn b() {}\n\n// ANCHOR_END: b\n",
    )
    .unwrap();
    let page = dir.path().join("page.md");
    let path = code.display().to_string();
    // Block a matches its region (blank line included); block b has drifted.
    let text = format!(
        "<!-- include: {path}:a -->\n```rust\nfn a() {{}}\n\n```\n\n<!-- include: {path}:b -->\n```rust\nfn old() {{}}\n```\n"
    );
    std::fs::write(&page, &text).unwrap();
    assert_eq!(check_page(&page, false).len(), 1);
    check_page(&page, true);
    // The update rewrote b with its blank line and left a as it was: the check agrees.
    let problems = check_page(&page, false);
    assert!(problems.is_empty(), "{problems:?}");
    let updated = std::fs::read_to_string(&page).unwrap();
    assert!(updated.contains("```rust\nfn a() {}\n\n```"), "{updated}");
    assert!(updated.contains("```rust\nfn b() {}\n\n```"), "{updated}");
}
