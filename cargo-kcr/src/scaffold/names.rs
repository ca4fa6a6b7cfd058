//! Validated names: a project's name and domain, a kind's group, version and kind, and the
//! names derived from them (the Rust module, the plural, the Kubernetes version feature).

use crate::scaffold::error::ScaffoldError;

/// Rust's keywords (strict and reserved, 2024 edition): a module may not be named after one.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
    "pub", "ref", "return", "self", "static", "struct", "super", "trait", "true", "type", "unsafe",
    "use", "where", "while", "abstract", "become", "box", "do", "final", "macro", "override",
    "priv", "try", "typeof", "unsized", "virtual", "yield",
];

/// The Kubernetes minor versions k8s-openapi 0.29 supports (its features `v1_33` to `v1_37`).
pub const KUBERNETES_VERSIONS: &[&str] = &["1.33", "1.34", "1.35", "1.36", "1.37"];

/// The Kubernetes version a project gets unless told otherwise: the newest.
pub const DEFAULT_KUBERNETES: &str = "1.37";

fn invalid(what: &'static str, value: &str, reason: impl Into<String>) -> ScaffoldError {
    ScaffoldError::Invalid {
        what,
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Checks a DNS-1123 label: lowercase letters, digits and `-`, starting and ending with a
/// letter or digit, at most 63 characters.
fn dns_label(what: &'static str, value: &str, label: &str) -> Result<(), ScaffoldError> {
    if label.is_empty() || label.len() > 63 {
        return Err(invalid(
            what,
            value,
            format!("{label:?} must be 1 to 63 characters"),
        ));
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if !label.chars().all(ok_char) || !label.starts_with(alnum) || !label.ends_with(alnum) {
        return Err(invalid(
            what,
            value,
            "expected lowercase letters, digits and '-', starting and ending with a letter or digit (a DNS subdomain)",
        ));
    }
    Ok(())
}

/// Checks a DNS-1123 subdomain with at least two labels (`example.com`), as a CRD's group
/// must be.
pub fn validate_subdomain(what: &'static str, value: &str) -> Result<(), ScaffoldError> {
    if value.len() > 253 {
        return Err(invalid(what, value, "longer than 253 characters"));
    }
    if !value.contains('.') {
        return Err(invalid(
            what,
            value,
            "expected a DNS subdomain with at least one dot, such as example.com",
        ));
    }
    value.split('.').try_for_each(|l| dns_label(what, value, l))
}

/// A project's name: a DNS label (it names the Deployment, the ServiceAccount and the
/// namespace `<name>-system`) that is also a Cargo package name.
pub fn validate_project_name(name: &str) -> Result<(), ScaffoldError> {
    dns_label("project name", name, name)?;
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(invalid("project name", name, "must start with a letter"));
    }
    if name.len() > 56 {
        return Err(invalid(
            "project name",
            name,
            "at most 56 characters (the namespace is <name>-system)",
        ));
    }
    let krate = crate_name(name);
    if KEYWORDS.contains(&krate.as_str()) || ["std", "core", "alloc", "test"].contains(&name) {
        return Err(invalid(
            "project name",
            name,
            "a Rust keyword or a name of Rust's own crates",
        ));
    }
    Ok(())
}

/// The Rust crate name of a project: `-` becomes `_`.
pub fn crate_name(project: &str) -> String {
    project.replace('-', "_")
}

/// A kind: CamelCase (an uppercase ASCII letter, then ASCII letters and digits), at most 63
/// characters, and its module name (snake case) not a Rust keyword.
pub fn validate_kind(kind: &str) -> Result<(), ScaffoldError> {
    let reason = "expected CamelCase: an uppercase letter, then letters and digits (e.g. CronJob)";
    if !kind.starts_with(|c: char| c.is_ascii_uppercase())
        || !kind.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(invalid("kind", kind, reason));
    }
    if kind.len() > 63 {
        return Err(invalid("kind", kind, "at most 63 characters"));
    }
    if kind == "Self" || KEYWORDS.contains(&snake_case(kind).as_str()) {
        return Err(invalid(
            "kind",
            kind,
            "its module name would be a Rust keyword",
        ));
    }
    Ok(())
}

/// A version as Kubernetes orders them: `v1`, `v2`, `v1alpha1`, `v1beta2`...
pub fn validate_version(version: &str) -> Result<(), ScaffoldError> {
    let reason = "expected v<N>, v<N>alpha<M> or v<N>beta<M> with N, M from 1 (e.g. v1, v1alpha1)";
    let number =
        |s: &str| !s.is_empty() && !s.starts_with('0') && s.chars().all(|c| c.is_ascii_digit());
    let Some(rest) = version.strip_prefix('v') else {
        return Err(invalid("version", version, reason));
    };
    let major_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (major, tail) = rest.split_at(major_end);
    let ok = number(major)
        && (tail.is_empty()
            || tail.strip_prefix("alpha").is_some_and(number)
            || tail.strip_prefix("beta").is_some_and(number));
    if ok {
        Ok(())
    } else {
        Err(invalid("version", version, reason))
    }
}

/// The group of a kind: `--group` as given when it holds a dot, else `<group>.<domain>`
/// (kubebuilder's rule); checked to be a DNS subdomain.
pub fn full_group(group: &str, domain: &str) -> Result<String, ScaffoldError> {
    let full = if group.contains('.') || domain.is_empty() {
        group.to_string()
    } else {
        format!("{group}.{domain}")
    };
    validate_subdomain("group", &full)?;
    Ok(full)
}

/// k8s-openapi's feature for a Kubernetes version (`1.37` → `v1_37`); `v1.37` and `1.37.2`
/// are read as `1.37`.
pub fn kubernetes_feature(version: &str) -> Result<String, ScaffoldError> {
    let trimmed = version.trim_start_matches('v');
    let minor: String = trimmed.split('.').take(2).collect::<Vec<_>>().join(".");
    if KUBERNETES_VERSIONS.contains(&minor.as_str()) {
        Ok(format!("v{}", minor.replace('.', "_")))
    } else {
        Err(ScaffoldError::UnsupportedKubernetes(version.to_string()))
    }
}

/// `CronJob` → `cron_job`, `HTTPRoute` → `http_route`, `V2Thing` → `v2_thing`.
pub fn snake_case(kind: &str) -> String {
    let chars: Vec<char> = kind.chars().collect();
    let mut out = String::with_capacity(kind.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev = i.checked_sub(1).map(|p| chars[p]);
            let next = chars.get(i + 1);
            let starts_word = prev.is_some_and(|p| {
                p.is_ascii_lowercase()
                    || p.is_ascii_digit()
                    || (p.is_ascii_uppercase() && next.is_some_and(|n| n.is_ascii_lowercase()))
            });
            if starts_word {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The plural resource name of a kind (lowercase): `Memcached` → `memcacheds`, `Policy` →
/// `policies`, `Ingress` → `ingresses`. Written into the kind's `#[kube(plural = ...)]`, so
/// the code and `config/` agree whatever kube's own rule would give.
pub fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    let consonant_y = lower.ends_with('y')
        && !lower.ends_with("ay")
        && !lower.ends_with("ey")
        && !lower.ends_with("oy")
        && !lower.ends_with("uy");
    if consonant_y {
        format!("{}ies", &lower[..lower.len() - 1])
    } else if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|e| lower.ends_with(e))
    {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        for good in ["CronJob", "Memcached", "V2Thing", "HTTPRoute"] {
            assert!(validate_kind(good).is_ok(), "{good}");
        }
        for bad in [
            "cronJob", "Cron_Job", "Cron-Job", "", "Self", "Type", "Crön",
        ] {
            let err = validate_kind(bad).unwrap_err();
            assert!(err.to_string().starts_with("invalid kind"), "{bad}: {err}");
        }
    }

    #[test]
    fn groups_versions_and_projects() {
        assert_eq!(
            full_group("batch", "example.com").unwrap(),
            "batch.example.com"
        );
        assert_eq!(full_group("a.b.io", "example.com").unwrap(), "a.b.io");
        for bad in ["Batch", "ba_tch", "-batch"] {
            assert!(full_group(bad, "example.com").is_err(), "{bad}");
        }
        assert!(full_group("batch", "").is_err(), "no dot");
        for good in ["v1", "v2", "v1alpha1", "v10beta3"] {
            assert!(validate_version(good).is_ok(), "{good}");
        }
        for bad in ["1", "v0", "v01", "v1alpha", "v1gamma1", "V1", "v1beta0", ""] {
            assert!(validate_version(bad).is_err(), "{bad}");
        }
        assert!(validate_project_name("my-operator").is_ok());
        for bad in ["My", "my_op", "1op", "op-", "type", ""] {
            assert!(validate_project_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn derived_names() {
        assert_eq!(snake_case("CronJob"), "cron_job");
        assert_eq!(snake_case("HTTPRoute"), "http_route");
        assert_eq!(snake_case("Memcached"), "memcached");
        assert_eq!(snake_case("V2Thing"), "v2_thing");
        assert_eq!(plural("Memcached"), "memcacheds");
        assert_eq!(plural("Policy"), "policies");
        assert_eq!(plural("Gateway"), "gateways");
        assert_eq!(plural("Ingress"), "ingresses");
        assert_eq!(kubernetes_feature("1.33").unwrap(), "v1_33");
        assert_eq!(kubernetes_feature("v1.37.2").unwrap(), "v1_37");
        assert!(kubernetes_feature("1.32").is_err());
    }
}
