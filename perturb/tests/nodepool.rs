//! The NodePool operator's exploration in CI: a seeded sample of 24 runs over every class
//! (the whole exploration is `cargo run -p kcr-perturb --example nodepool`).

#[path = "../examples/nodepool/exploration.rs"]
mod exploration;

#[tokio::test]
async fn nodepool_operator_survives_a_sample_of_perturbations() {
    let report = exploration::exploration()
        .max_runs(24)
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
    assert!(report.points >= 80, "{report}");
    assert_eq!(report.points_tried, 24, "{report}");
    assert_eq!(
        report.runs, 26,
        "two reference runs and the sample: {report}"
    );
    for class in kcr_perturb::Class::ALL {
        assert!(
            report.tried.iter().any(|t| t.run.class() == Some(class)),
            "the sample covers {class}: {report}"
        );
    }
    assert!(report.findings.is_empty(), "{report}");
}
