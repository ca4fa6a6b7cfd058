//! `cargo run -p kcr-protobuf-tables`: rewrite `envtest/src/protobuf/generated.rs` from the
//! `generated.proto` files and Go sources of k8s.io/api and k8s.io/apimachinery in the Go module
//! cache. `--check` only compares, and fails when the file is out of date.

use std::process::ExitCode;

fn main() -> ExitCode {
    let check = std::env::args().any(|a| a == "--check");
    let cache = match kcr_protobuf_tables::module_cache() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("protobuf-tables: {e}");
            return ExitCode::FAILURE;
        }
    };
    let text = match kcr_protobuf_tables::generate(&cache) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("protobuf-tables: {e}");
            return ExitCode::FAILURE;
        }
    };
    let path = kcr_protobuf_tables::workspace_root().join(kcr_protobuf_tables::OUTPUT);
    if check {
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current != text {
            eprintln!(
                "protobuf-tables: {} is out of date: cargo run -p kcr-protobuf-tables",
                path.display()
            );
            return ExitCode::FAILURE;
        }
        return ExitCode::SUCCESS;
    }
    if let Err(e) = std::fs::write(&path, text) {
        eprintln!("protobuf-tables: {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    println!("{}", path.display());
    ExitCode::SUCCESS
}
