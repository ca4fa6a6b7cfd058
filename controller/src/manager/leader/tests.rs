use super::*;

const LEASE: Duration = Duration::from_secs(15);

#[tokio::test(start_paused = true)]
async fn decisions_follow_client_go() {
    let t0 = Instant::now();
    assert_eq!(decide(None, None, t0, t0, "me", LEASE), Decision::Take);
    assert_eq!(
        decide(Some(""), Some(15), t0, t0, "me", LEASE),
        Decision::Take
    );
    assert_eq!(
        decide(Some("me"), Some(15), t0, t0, "me", LEASE),
        Decision::Renew
    );
    // held by another: valid until lease duration after we first observed that record
    let later = t0 + Duration::from_secs(14);
    assert_eq!(
        decide(Some("other"), Some(15), t0, later, "me", LEASE),
        Decision::HeldBy("other".into())
    );
    let expired = t0 + Duration::from_secs(15);
    assert_eq!(
        decide(Some("other"), Some(15), t0, expired, "me", LEASE),
        Decision::Take
    );
    // the record's own duration wins over ours; a missing one falls back to ours
    assert_eq!(
        decide(Some("other"), Some(60), t0, expired, "me", LEASE),
        Decision::HeldBy("other".into())
    );
    assert_eq!(
        decide(Some("other"), None, t0, expired, "me", LEASE),
        Decision::Take
    );
    assert_eq!(
        decide(Some("other"), Some(0), t0, later, "me", LEASE),
        Decision::HeldBy("other".into())
    );
}

#[test]
fn config_defaults_and_validation() {
    let c = LeaderElectionConfig::new("my-lease");
    assert_eq!(c.timings.lease_duration, Duration::from_secs(15));
    assert_eq!(c.timings.renew_deadline, Duration::from_secs(10));
    assert_eq!(c.timings.retry_period, Duration::from_secs(2));
    assert!(!c.release_on_cancel);
    assert!(c.identity.contains('_'));
    assert_ne!(
        c.identity,
        LeaderElectionConfig::new("x").identity,
        "identities are unique"
    );
    c.validate().unwrap();
    let bad = c.clone().timings(
        Duration::from_secs(10),
        Duration::from_secs(10),
        Duration::from_secs(2),
    );
    assert!(
        bad.validate()
            .unwrap_err()
            .to_string()
            .contains("lease_duration")
    );
    let bad = c.clone().timings(
        Duration::from_secs(15),
        Duration::from_secs(2),
        Duration::from_secs(2),
    );
    assert!(
        bad.validate()
            .unwrap_err()
            .to_string()
            .contains("renew_deadline")
    );
    assert!(c.clone().identity("").validate().is_err());
    assert!(LeaderElectionConfig::new("").validate().is_err());
}

#[test]
fn lease_timings_check_client_gos_invariants() {
    let s = Duration::from_secs;
    assert_eq!(
        LeaseTimings::default(),
        LeaseTimings::new(s(15), s(10), s(2))
    );
    LeaseTimings::default().validate().unwrap();
    let cases = [
        (
            LeaseTimings::new(s(10), s(10), s(2)),
            "lease_duration must be greater",
        ),
        (
            LeaseTimings::new(s(15), s(2), s(2)),
            "renew_deadline must be greater",
        ),
        (
            LeaseTimings::new(s(15), Duration::from_millis(2400), s(2)),
            "renew_deadline must be greater",
        ),
        (
            LeaseTimings::new(s(15), s(10), Duration::ZERO),
            "retry_period must be positive",
        ),
    ];
    for (timings, reason) in cases {
        let err = timings.validate().unwrap_err();
        assert!(err.reason().starts_with(reason), "{timings:?}: {err}");
        // The config that holds them reports the same reason.
        let mut config = LeaderElectionConfig::new("l");
        config.timings = timings;
        assert!(config.validate().unwrap_err().to_string().contains(reason));
    }
}
