//! Service defaulting (`SetDefaults_Service`) and what the Service REST storage allocates on
//! create: a cluster IP from the service range and node ports for `NodePort` and
//! `LoadBalancer` Services; an update without them keeps the allocated ones.
//!
//! The range is kube-apiserver's default, `10.0.0.0/24` (the real backend's too);
//! `10.0.0.1` is the `kubernetes` Service's. Dynamic addresses come from the upper band
//! (`10.0.0.17` and up; the first 16 are kept for static ones, as upstream), taken at random;
//! node ports from `30000-32767`.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::{items_mut, object_field, or_insert};
use crate::error::ApiError;

/// The service range's prefix (a /24) and its first address of the dynamic band.
const RANGE_PREFIX: &str = "10.0.0.";
const DYNAMIC_FIRST: u32 = 17;
const RANGE_LAST: u32 = 254;
/// The node port range.
const NODE_PORTS: std::ops::RangeInclusive<u32> = 30000..=32767;

fn service_type(spec: &Map<String, Value>) -> &str {
    spec.get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
}

/// A Service's defaults on every write; an update (`old`) keeps the cluster IPs and node ports
/// it does not set.
pub(crate) fn service(old: Option<&Value>, obj: &mut Value) {
    let Some(spec) = object_field(obj, "spec") else {
        return;
    };
    or_insert(spec, "type", json!("ClusterIP"));
    let kind = service_type(spec).to_string();
    if kind != "ExternalName" {
        or_insert(spec, "sessionAffinity", json!("None"));
        or_insert(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if kind == "NodePort" || kind == "LoadBalancer" {
        or_insert(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    for p in items_mut(spec, "ports") {
        or_insert(p, "protocol", json!("TCP"));
        if let Some(port) = p.get("port").cloned() {
            or_insert(p, "targetPort", port);
        }
    }
    let Some(old) = old.map(|o| &o["spec"]) else {
        return;
    };
    if kind != "ExternalName" && spec.get("clusterIP").is_none_or(|ip| ip == "") {
        for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if let Some(v) = old.get(field) {
                spec.insert(field.into(), v.clone());
            }
        }
    }
    let old_ports = old["ports"].as_array().cloned().unwrap_or_default();
    for p in items_mut(spec, "ports") {
        if p.contains_key("nodePort") {
            continue;
        }
        if let Some(node_port) = old_ports
            .iter()
            .find(|o| o["port"] == p["port"] && o["protocol"] == p["protocol"])
            .and_then(|o| o.get("nodePort"))
        {
            p.insert("nodePort".into(), node_port.clone());
        }
    }
}

/// The first status of a Service (`PrepareForCreate`).
pub(crate) fn service_status(obj: &mut Value) {
    if let Some(map) = obj.as_object_mut() {
        map.insert("status".into(), json!({"loadBalancer": {}}));
    }
}

/// A pseudo-random index below `n` (a fresh uuid's bytes; no need for more).
fn random_below(n: u32) -> u32 {
    let b = uuid::Uuid::new_v4().into_bytes();
    u32::from_le_bytes([b[0], b[1], b[2], b[3]]) % n.max(1)
}

/// Picks a free value of `lo..=hi` at random (the next free one after a random start).
fn pick(lo: u32, hi: u32, used: &HashSet<u32>) -> Option<u32> {
    let size = hi - lo + 1;
    let start = random_below(size);
    (0..size)
        .map(|i| lo + (start + i) % size)
        .find(|v| !used.contains(v))
}

fn invalid(name: &str, field: &str, message: String) -> ApiError {
    ApiError::invalid(
        "",
        "Service",
        name,
        vec![(field.into(), "FieldValueInvalid".into(), message)],
    )
}

/// On create: a cluster IP (unless `None` or `ExternalName`) and node ports, given the
/// Services stored now (`existing`). A requested address or port must be free and in range
/// (422 otherwise, as upstream).
pub(crate) fn allocate<'a>(
    existing: impl Iterator<Item = &'a Value>,
    obj: &mut Value,
) -> Result<(), ApiError> {
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    for s in existing {
        if let Some(last) = s["spec"]["clusterIP"]
            .as_str()
            .and_then(|ip| ip.strip_prefix(RANGE_PREFIX))
            .and_then(|l| l.parse::<u32>().ok())
        {
            ips.insert(last);
        }
        for p in s["spec"]["ports"].as_array().into_iter().flatten() {
            if let Some(n) = p["nodePort"].as_u64() {
                ports.insert(n as u32);
            }
        }
    }
    let Some(spec) = object_field(obj, "spec") else {
        return Ok(());
    };
    let kind = service_type(spec).to_string();
    if kind == "ExternalName" {
        return Ok(());
    }
    let requested = spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let ip = match requested.as_str() {
        "None" => None,
        "" => {
            let last = pick(DYNAMIC_FIRST, RANGE_LAST, &ips)
                .or_else(|| pick(1, DYNAMIC_FIRST - 1, &ips))
                .ok_or_else(|| {
                    ApiError::new(
                        500,
                        "InternalError",
                        "Internal error occurred: failed to allocate a serviceIP: range is full",
                    )
                })?;
            Some(format!("{RANGE_PREFIX}{last}"))
        }
        ip => {
            let last = ip
                .strip_prefix(RANGE_PREFIX)
                .and_then(|l| l.parse::<u32>().ok())
                .filter(|l| (1..=RANGE_LAST).contains(l));
            match last {
                None => {
                    return Err(invalid(
                        &name,
                        "spec.clusterIPs",
                        format!(
                            "Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is 10.0.0.0/24"
                        ),
                    ));
                }
                Some(l) if ips.contains(&l) => {
                    return Err(invalid(
                        &name,
                        "spec.clusterIPs",
                        format!(
                            "Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: provided IP is already allocated"
                        ),
                    ));
                }
                Some(_) => Some(ip.to_string()),
            }
        }
    };
    let ip = ip.unwrap_or_else(|| "None".to_string());
    spec.insert("clusterIP".into(), json!(ip));
    spec.insert("clusterIPs".into(), json!([ip]));
    or_insert(spec, "ipFamilies", json!(["IPv4"]));
    or_insert(spec, "ipFamilyPolicy", json!("SingleStack"));
    if kind == "NodePort" || kind == "LoadBalancer" {
        for p in items_mut(spec, "ports") {
            if let Some(n) = p.get("nodePort").and_then(Value::as_u64) {
                let n = n as u32;
                if !NODE_PORTS.contains(&n) || ports.contains(&n) {
                    return Err(invalid(
                        &name,
                        "spec.ports[0].nodePort",
                        format!("Invalid value: {n}: provided port is already allocated"),
                    ));
                }
                ports.insert(n);
                continue;
            }
            let n = pick(*NODE_PORTS.start(), *NODE_PORTS.end(), &ports).ok_or_else(|| {
                ApiError::new(
                    500,
                    "InternalError",
                    "Internal error occurred: failed to allocate a nodePort: range is full",
                )
            })?;
            ports.insert(n);
            p.insert("nodePort".into(), json!(n));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"name": "s"}, "spec": spec})
    }

    #[test]
    fn allocates_a_free_cluster_ip_and_node_ports() {
        let taken =
            svc(json!({"clusterIP": "10.0.0.1", "ports": [{"port": 1, "nodePort": 30000}]}));
        let mut s = svc(json!({"type": "NodePort", "ports": [{"port": 80}]}));
        allocate([&taken].into_iter(), &mut s).unwrap();
        let ip = s["spec"]["clusterIP"].as_str().unwrap();
        let last: u32 = ip.strip_prefix(RANGE_PREFIX).unwrap().parse().unwrap();
        assert!((DYNAMIC_FIRST..=RANGE_LAST).contains(&last), "{ip}");
        assert_eq!(s["spec"]["clusterIPs"], json!([ip]));
        assert_eq!(s["spec"]["ipFamilies"], json!(["IPv4"]));
        let port = s["spec"]["ports"][0]["nodePort"].as_u64().unwrap() as u32;
        assert!(NODE_PORTS.contains(&port) && port != 30000);
    }

    #[test]
    fn requested_addresses_must_be_free_and_in_range() {
        let taken = svc(json!({"clusterIP": "10.0.0.1"}));
        for (ip, message) in [
            ("10.0.0.1", "already allocated"),
            ("192.168.0.1", "not in the valid range"),
        ] {
            let mut s = svc(json!({"clusterIP": ip}));
            let err = allocate([&taken].into_iter(), &mut s).unwrap_err();
            assert_eq!(err.code, 422);
            assert!(err.message.contains(message), "{}", err.message);
        }
        let mut headless = svc(json!({"clusterIP": "None"}));
        allocate([&taken].into_iter(), &mut headless).unwrap();
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
        let mut external = svc(json!({"type": "ExternalName", "externalName": "x.example"}));
        allocate(std::iter::empty(), &mut external).unwrap();
        assert!(external["spec"].get("clusterIP").is_none());
    }

    #[test]
    fn an_update_keeps_what_was_allocated() {
        let old = svc(
            json!({"type": "NodePort", "clusterIP": "10.0.0.20", "clusterIPs": ["10.0.0.20"],
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30100}]}),
        );
        let mut new = svc(json!({"type": "NodePort", "ports": [{"port": 80}]}));
        service(Some(&old), &mut new);
        assert_eq!(new["spec"]["clusterIP"], "10.0.0.20");
        assert_eq!(new["spec"]["ports"][0]["nodePort"], 30100);
        assert_eq!(new["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(new["spec"]["externalTrafficPolicy"], "Cluster");
    }
}
