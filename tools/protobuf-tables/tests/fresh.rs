//! The checked-in tables are what the generator produces from the Go module cache.

use kcr_protobuf_tables::{Error, OUTPUT, generate, module_cache, workspace_root};

#[test]
fn checked_in_tables_are_up_to_date() {
    let cache = module_cache().expect("a Go module cache location");
    let want = match generate(&cache) {
        Ok(text) => text,
        // The one reason to skip: the modules are not downloaded (CI has them: the control
        // plane's build downloads k8s.io/kubernetes with k8s.io/api and k8s.io/apimachinery).
        Err(Error::Missing(why)) => {
            println!("skipped: {why}");
            return;
        }
        Err(e) => panic!("generating the tables: {e}"),
    };
    let path = workspace_root().join(OUTPUT);
    let got = std::fs::read_to_string(&path).expect("the checked-in tables");
    assert!(
        got == want,
        "{} is out of date: run `cargo run -p kcr-protobuf-tables`",
        path.display()
    );
}
