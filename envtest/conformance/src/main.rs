//! The conformance suite's binary: starts both backends, runs every area, prints the
//! differences and the `fidelity:` line.

use std::process::ExitCode;

use kcr_envtest::{Backend, TestApiServer};
use kcr_envtest_conformance::run::{Side, max_paths, parse_known, run_area};
use kcr_envtest_conformance::{KNOWN_DIFFERENCES, areas};

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = args.iter().any(|a| a == "--check");
    let verbose = args.iter().any(|a| a == "--verbose");
    let no_goclient = args.iter().any(|a| a == "--no-goclient");
    let only: Option<&String> = args
        .iter()
        .position(|a| a == "--area")
        .and_then(|i| args.get(i + 1));
    // `--known PATH`: the list of expected differences for another Kubernetes release than the
    // one kcr-envtest follows (the built-in list, known_differences.txt, is for the newest).
    let known_file: Option<&String> = args
        .iter()
        .position(|a| a == "--known")
        .and_then(|i| args.get(i + 1));
    let known_text = match known_file {
        None => KNOWN_DIFFERENCES.to_string(),
        Some(path) => match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("cannot read the list of known differences {path}: {e}");
                return ExitCode::from(2);
            }
        },
    };

    let real = match TestApiServer::builder()
        .backend(Backend::Real)
        .start()
        .await
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "cannot start the real backend (build it with tools/control-plane/build.sh and \
                 set KUBEBUILDER_ASSETS): {e}"
            );
            return ExitCode::from(2);
        }
    };
    let envtest = match TestApiServer::builder()
        .backend(Backend::InProcess)
        .start()
        .await
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot start the in-process backend: {e}");
            return ExitCode::from(2);
        }
    };
    let known = parse_known(&known_text);
    let mut r = Side::new(&real.url());
    let mut e = Side::new(&envtest.url());
    let (mut total, mut equal, mut unexpected, mut expected) = (0usize, 0usize, 0usize, 0usize);
    let mut seen = std::collections::BTreeSet::new();
    let mut outcomes = Vec::new();
    for area in areas::all() {
        if only.is_some_and(|o| *o != area.name) {
            continue;
        }
        outcomes.extend(run_area(&mut r, &mut e, &area).await);
    }
    if !no_goclient && only.is_none_or(|o| o == "goclient") {
        let (real_kc, envtest_kc) = (real.kubeconfig_yaml(), envtest.kubeconfig_yaml());
        let dir =
            std::env::temp_dir().join(format!("kcr-conformance-goclient-{}", std::process::id()));
        let result = tokio::task::spawn_blocking(move || {
            kcr_envtest_conformance::goclient::run(&real_kc, &envtest_kc, &dir)
        })
        .await;
        match result {
            Ok(Ok(o)) => outcomes.extend(o),
            Ok(Err(e)) => {
                eprintln!("the Go client section could not run: {e}");
                return ExitCode::from(2);
            }
            Err(e) => {
                eprintln!("the Go client section panicked: {e}");
                return ExitCode::from(2);
            }
        }
    }
    {
        for o in outcomes {
            total += 1;
            seen.insert(o.name.clone());
            if o.diffs.is_empty() {
                equal += 1;
                if known.contains_key(&o.name) {
                    println!(
                        "FIXED {}: equal now; remove it from known_differences.txt",
                        o.name
                    );
                }
                continue;
            }
            let shown: Vec<&str> = o
                .diffs
                .iter()
                .take(max_paths())
                .map(String::as_str)
                .collect();
            let more = o.diffs.len().saturating_sub(shown.len());
            let mut detail = shown.join("; ");
            if more > 0 {
                detail.push_str(&format!("; … {more} more"));
            }
            let fp = o.fingerprint();
            match known.get(&o.name) {
                Some(k) if k.matches(&o) => {
                    expected += 1;
                    if verbose {
                        println!("KNOWN {} [{} {fp}]: {detail}", o.name, k.cause);
                    }
                }
                Some(k) => {
                    unexpected += 1;
                    println!(
                        "CHANGED {} [{fp}, listed {} as {}]: {detail}",
                        o.name, k.fingerprint, k.cause
                    );
                }
                None => {
                    unexpected += 1;
                    println!("DIFF {} [{fp}]: {detail}", o.name);
                }
            }
        }
    }
    if only.is_none() {
        for name in known.keys().filter(|n| !seen.contains(*n)) {
            println!("STALE {name}: listed in known_differences.txt but no such exchange");
        }
    }
    println!("known differences: {expected}; unexpected differences: {unexpected}");
    let version = match real.client().apiserver_version().await {
        Ok(v) => v.git_version,
        Err(e) => format!("unknown version ({e})"),
    };
    println!("fidelity: {equal} of {total} exchanges equal (against kube-apiserver {version})");
    drop(real);
    if check && unexpected > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
