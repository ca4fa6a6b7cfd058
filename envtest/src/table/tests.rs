//! Unit tests of the table printer.
use super::*;

#[test]
fn json_paths() {
    let o = json!({"spec": {"n": 3, "items": [{"a": 1}, {"a": 2}]},
                   "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    assert_eq!(json_path(&o, ".spec.n"), Some(&json!(3)));
    assert_eq!(json_path(&o, ".spec.items[1].a"), Some(&json!(2)));
    assert_eq!(
        json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
        Some(&json!("True"))
    );
    assert_eq!(json_path(&o, ".spec.missing"), None);
}

/// `(column name, priority)` of a table, and its first row's cells.
fn layout(t: &Value) -> (Vec<(String, i64)>, Vec<Value>) {
    let columns = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["priority"].as_i64().unwrap(),
            )
        })
        .collect();
    (columns, t["rows"][0]["cells"].as_array().unwrap().clone())
}

#[test]
fn deployment_columns_follow_kubectl() {
    let reg = crate::resources::Registry::with_builtins();
    let d = json!({"metadata": {"name": "web", "creationTimestamp": "2020-01-01T00:00:00Z"},
                   "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                            "template": {"spec": {"containers": [
                                {"name": "app", "image": "nginx"},
                                {"name": "log", "image": "busybox"}]}}},
                   "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
    let (columns, cells) = layout(&table(
        reg.get("apps/deployments").unwrap(),
        "v1",
        &[&d],
        false,
        None,
    ));
    let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "Name",
            "Ready",
            "Up-to-date",
            "Available",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    assert_eq!(
        (columns[4].1, columns[5].1),
        (0, 1),
        "AGE before the wide columns, which have priority 1"
    );
    assert_eq!(
        [&cells[..4], &cells[5..]].concat(),
        [
            json!("web"),
            json!("2/3"),
            json!(3),
            json!(2),
            json!("app,log"),
            json!("nginx,busybox"),
            json!("app=web")
        ]
    );
    // No replicas in the spec: the server's default, 1.
    let bare = json!({"metadata": {"name": "b"}, "spec": {}});
    let (_, cells) = layout(&table(
        reg.get("apps/deployments").unwrap(),
        "v1",
        &[&bare],
        false,
        None,
    ));
    assert_eq!(cells[1], "0/1");
}

#[test]
fn jobs_cronjobs_statefulsets_and_daemonsets_follow_kubectl() {
    let reg = crate::resources::Registry::with_builtins();
    let shown = |key: &str, o: &Value| -> Vec<(String, Value)> {
        let (columns, cells) = layout(&table(reg.get(key).unwrap(), "v1", &[o], false, None));
        columns
            .into_iter()
            .zip(cells)
            .filter(|((name, prio), _)| *prio == 0 && name != "Age")
            .map(|((name, _), cell)| (name, cell))
            .collect()
    };
    let row = |pairs: &[(&str, Value)]| -> Vec<(String, Value)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect()
    };
    let job = json!({"metadata": {"name": "j"}, "spec": {"completions": 3},
                     "status": {"succeeded": 3, "startTime": "2020-01-01T00:00:00Z",
                                "completionTime": "2020-01-01T00:02:05Z",
                                "conditions": [{"type": "Complete", "status": "True"}]}});
    assert_eq!(
        shown("batch/jobs", &job),
        row(&[
            ("Name", json!("j")),
            ("Status", json!("Complete")),
            ("Completions", json!("3/3")),
            ("Duration", json!("2m5s"))
        ])
    );
    let parallel = json!({"metadata": {"name": "p"}, "spec": {"parallelism": 4},
                          "status": {"succeeded": 1}});
    assert_eq!(
        shown("batch/jobs", &parallel)[1..],
        row(&[
            ("Status", json!("Running")),
            ("Completions", json!("1/1 of 4")),
            ("Duration", json!(""))
        ])[..]
    );
    let cron = json!({"metadata": {"name": "c"},
                      "spec": {"schedule": "*/5 * * * *", "suspend": true,
                               "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}},
                      "status": {"active": [{"name": "c-1"}]}});
    assert_eq!(
        shown("batch/cronjobs", &cron),
        row(&[
            ("Name", json!("c")),
            ("Schedule", json!("*/5 * * * *")),
            ("Timezone", json!("<none>")),
            ("Suspend", json!("True")),
            ("Active", json!(1)),
            ("Last Schedule", json!("<none>"))
        ])
    );
    let sts = json!({"metadata": {"name": "s"}, "spec": {"replicas": 3},
                     "status": {"readyReplicas": 1}});
    assert_eq!(
        shown("apps/statefulsets", &sts),
        row(&[("Name", json!("s")), ("Ready", json!("1/3"))])
    );
    let ds = json!({"metadata": {"name": "d"},
                    "spec": {"template": {"spec": {"nodeSelector": {"disk": "ssd"}}}},
                    "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3,
                               "numberReady": 2, "updatedNumberScheduled": 3,
                               "numberAvailable": 2}});
    assert_eq!(
        shown("apps/daemonsets", &ds)[1..],
        row(&[
            ("Desired", json!(3)),
            ("Current", json!(3)),
            ("Ready", json!(2)),
            ("Up-to-date", json!(3)),
            ("Available", json!(2)),
            ("Node Selector", json!("disk=ssd"))
        ])[..]
    );
}

#[test]
fn service_columns_follow_kubectl() {
    let reg = crate::resources::Registry::with_builtins();
    let svc = |spec: Value, status: Value| {
        let o = json!({"metadata": {"name": "s"}, "spec": spec, "status": status});
        let (_, cells) = layout(&table(
            reg.get("services").unwrap(),
            "v1",
            &[&o],
            false,
            None,
        ));
        cells[1..5].to_vec()
    };
    assert_eq!(
        svc(
            json!({"type": "NodePort", "clusterIP": "10.0.0.7",
                   "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"},
                             {"port": 53, "protocol": "UDP"}]}),
            json!({})
        ),
        [
            json!("NodePort"),
            json!("10.0.0.7"),
            json!("<none>"),
            json!("80:30080/TCP,53/UDP")
        ]
    );
    assert_eq!(
        svc(
            json!({"type": "LoadBalancer", "ports": [{"port": 443}]}),
            json!({})
        )[..3],
        [json!("LoadBalancer"), json!("<none>"), json!("<pending>")]
    );
    assert_eq!(
        svc(
            json!({"type": "LoadBalancer", "externalIPs": ["1.2.3.4"]}),
            json!({"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}]}})
        )[2],
        "5.6.7.8,1.2.3.4"
    );
    assert_eq!(
        svc(
            json!({"type": "ExternalName", "externalName": "example.com"}),
            json!({})
        )[2..],
        [json!("example.com"), json!("<none>")]
    );
}

#[test]
fn events_have_their_own_layout_in_both_apis() {
    let reg = crate::resources::Registry::with_builtins();
    let core = json!({"metadata": {"name": "web.1"}, "type": "Warning", "reason": "Failed",
                      "involvedObject": {"kind": "NodePool", "name": "gpu", "fieldPath": "spec"},
                      "source": {"component": "nodepool"}, "message": "patch failed",
                      "firstTimestamp": "2020-01-01T00:00:00Z",
                      "lastTimestamp": "2020-01-01T00:00:00Z", "count": 4});
    let (columns, cells) = layout(&table(
        reg.get("events").unwrap(),
        "v1",
        &[&core],
        false,
        None,
    ));
    let shown: Vec<&str> = columns
        .iter()
        .filter(|(_, p)| *p == 0)
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(shown, ["Last Seen", "Type", "Reason", "Object", "Message"]);
    assert_eq!(
        cells[1..],
        [
            json!("Warning"),
            json!("Failed"),
            json!("nodepool/gpu"),
            json!("spec"),
            json!("nodepool"),
            json!("patch failed"),
            cells[7].clone(),
            json!("4"),
            json!("web.1")
        ]
    );
    assert!(cells[0].as_str().unwrap().ends_with('y'), "{}", cells[0]);
    // events.k8s.io/v1 field names; no count means 1.
    let new_api = json!({"metadata": {"name": "e"}, "type": "Normal", "reason": "Synced",
                         "regarding": {"kind": "Pod", "name": "p"}, "note": "ok",
                         "reportingController": "kcr", "eventTime": "2020-01-01T00:00:00.000001Z"});
    let (_, cells) = layout(&table(
        reg.get("events.k8s.io/events").unwrap(),
        "v1",
        &[&new_api],
        false,
        None,
    ));
    assert_eq!(
        cells[1..7],
        [
            json!("Normal"),
            json!("Synced"),
            json!("pod/p"),
            json!(""),
            json!("kcr"),
            json!("ok")
        ]
    );
    assert_eq!(cells[8], "1");
    assert_ne!(
        cells[0], "<unknown>",
        "eventTime is used when nothing else is set"
    );
}

#[test]
fn node_status_column() {
    let reg = crate::resources::Registry::with_builtins();
    let nodes = reg.get("nodes").unwrap();
    let node = json!({"metadata": {"name": "n", "creationTimestamp": "2020-01-01T00:00:00Z"},
                      "spec": {"unschedulable": true},
                      "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    let t = table(nodes, "v1", &[&node], false, Some(7));
    assert_eq!(t["rows"][0]["cells"][1], "Ready,SchedulingDisabled");
    assert_eq!(t["metadata"]["resourceVersion"], "7");
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    let age = t["rows"][0]["cells"][4].as_str().unwrap();
    assert!(age.ends_with('y') || age.ends_with('d'), "{age}");
}

#[test]
fn persistent_volume_claim_columns_follow_kubectl() {
    let reg = crate::resources::Registry::with_builtins();
    let pvcs = reg.get("persistentvolumeclaims").unwrap();
    let bound = json!({"metadata": {"name": "data",
                        "annotations": {"volume.beta.kubernetes.io/storage-class": "old"}},
                       "spec": {"volumeName": "pv-1", "volumeMode": "Block",
                                "volumeAttributesClassName": "gold"},
                       "status": {"phase": "Bound", "capacity": {"storage": "10Gi"},
                                  "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"]}});
    let (columns, cells) = layout(&table(pvcs, "v1", &[&bound], false, None));
    let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "Name",
            "Status",
            "Volume",
            "Capacity",
            "Access Modes",
            "StorageClass",
            "VolumeAttributesClass",
            "Age",
            "VolumeMode"
        ]
    );
    assert_eq!(
        [&cells[..7], &cells[8..]].concat(),
        [
            json!("data"),
            json!("Bound"),
            json!("pv-1"),
            json!("10Gi"),
            json!("RWO,RWX"),
            json!("old"),
            json!("gold"),
            json!("Block")
        ]
    );
    let deleting = json!({"metadata": {"name": "d", "deletionTimestamp": "2020-01-01T00:00:00Z"},
                          "spec": {}, "status": {"phase": "Pending", "capacity": {"storage": "1Gi"}}});
    let (_, cells) = layout(&table(pvcs, "v1", &[&deleting], false, None));
    assert_eq!(
        cells[1..7],
        [
            json!("Terminating"),
            json!(""),
            json!(""),
            json!(""),
            json!(""),
            json!("<unset>")
        ]
    );
}
