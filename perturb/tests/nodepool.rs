//! The NodePool operator's exploration in CI: a seeded sample of 24 runs over every class
//! in-process (the whole exploration is `cargo run -p kcr-perturb --example nodepool`). On
//! the real backend, where every run starts a control plane (3 to 6 s), a sample of 8 runs of
//! the crash class (184 s for 24 runs of every class there, measured).

#[path = "../examples/nodepool/exploration.rs"]
mod exploration;

#[tokio::test]
async fn nodepool_operator_survives_a_sample_of_perturbations() {
    let in_process = kcr_envtest::Backend::from_env().unwrap() == kcr_envtest::Backend::InProcess;
    let (sample, classes) = if in_process {
        (24, kcr_perturb::Class::ALL.to_vec())
    } else {
        (8, vec![kcr_perturb::Class::Crash])
    };
    let report = exploration::exploration()
        .classes(classes.clone())
        .max_runs(sample)
        .seed(30)
        .run()
        .await
        .unwrap();
    println!("{report}");
    let line = report.summary_line("nodepool");
    println!("{line}");
    assert!(
        line.starts_with("perturbation-run controller=nodepool points="),
        "{line}"
    );
    // 20-odd writes (two crash points each), 20-odd MODIFIED events, some 27 events.
    assert!(
        report.points >= if in_process { 80 } else { 30 },
        "{report}"
    );
    assert_eq!(report.points_tried, sample, "{report}");
    assert_eq!(
        report.runs,
        sample + 2,
        "two reference runs and the sample: {report}"
    );
    for class in classes {
        assert!(
            report.tried.iter().any(|t| t.run.class() == Some(class)),
            "the sample covers {class}: {report}"
        );
    }
    assert!(report.findings.is_empty(), "{report}");
}
