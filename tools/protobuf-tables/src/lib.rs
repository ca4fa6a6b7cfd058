//! The generator of kcr-envtest's protobuf message tables (`envtest/src/protobuf/generated.rs`).
//!
//! Input, read from the Go module cache (`go env GOMODCACHE`):
//! - every `generated.proto` of `k8s.io/api` and those of `k8s.io/apimachinery`'s
//!   `pkg/apis/meta/v1`, `pkg/runtime`, `pkg/util/intstr` and `pkg/api/resource`, at
//!   [`K8S_MODULE_VERSION`]: the messages, their fields (number, label, type, `map<>`), the
//!   references across packages;
//! - the Go sources of the same packages, for what `generated.proto` does not say: the JSON name
//!   of each field (its `json:"..."` tag, matched to the proto field by the number in its
//!   `protobuf:"..."` tag), whether the JSON encoder omits its zero value (`omitempty` or
//!   `omitzero` on a non-pointer field), whether it is an embedded struct whose fields JSON
//!   inlines (`VolumeSource`, `ProbeHandler`), which structs are kinds (they embed `TypeMeta`),
//!   which messages are Go slice types (`ExtraValue`, JSON arrays), and each package's
//!   `GroupName`.
//!
//! The messages whose JSON form is custom (`Quantity`, `IntOrString`, `Time`, `MicroTime`,
//! `Duration`, `FieldsV1`, `RawExtension`) get a shape of their own; the decoder in
//! `envtest/src/protobuf/mod.rs` implements them.
//!
//! Run `cargo run -p kcr-protobuf-tables` to rewrite the file; `cargo test -p
//! kcr-protobuf-tables` fails when the checked-in file differs from what this produces.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The version of `k8s.io/api` and `k8s.io/apimachinery` the tables are generated from (that of
/// the Kubernetes release the test control plane builds, `tools/control-plane/v1.37/go.mod`).
pub const K8S_MODULE_VERSION: &str = "v0.37.2";

/// Where the generated module lives, relative to the workspace root.
pub const OUTPUT: &str = "envtest/src/protobuf/generated.rs";

/// The `k8s.io/apimachinery` packages read besides every package of `k8s.io/api`.
const APIMACHINERY_PACKAGES: &[&str] = &[
    "pkg/apis/meta/v1",
    "pkg/runtime",
    "pkg/util/intstr",
    "pkg/api/resource",
];

/// Why the tables were not generated.
#[derive(Debug)]
pub enum Error {
    /// The module cache does not hold the modules (or no module cache was found).
    Missing(String),
    /// The inputs are there but something in them was not understood.
    Input(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Missing(s) | Error::Input(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for Error {}

fn input(s: impl Into<String>) -> Error {
    Error::Input(s.into())
}

/// The Go module cache: `$GOMODCACHE`, else `go env GOMODCACHE`, else `$GOPATH/pkg/mod`, else
/// `~/go/pkg/mod`.
pub fn module_cache() -> Result<PathBuf, Error> {
    if let Some(dir) = std::env::var_os("GOMODCACHE").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Ok(out) = std::process::Command::new("go")
        .args(["env", "GOMODCACHE"])
        .output()
    {
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !dir.is_empty() {
            return Ok(PathBuf::from(dir));
        }
    }
    if let Some(dir) = std::env::var_os("GOPATH").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("pkg/mod"));
    }
    match std::env::var_os("HOME") {
        Some(home) => Ok(PathBuf::from(home).join("go/pkg/mod")),
        None => Err(Error::Missing("no Go module cache found".into())),
    }
}

/// The module directories in `cache`, `k8s.io/api` first; [`Error::Missing`] when either is
/// absent.
fn modules(cache: &Path) -> Result<[PathBuf; 2], Error> {
    let api = cache.join(format!("k8s.io/api@{K8S_MODULE_VERSION}"));
    let machinery = cache.join(format!("k8s.io/apimachinery@{K8S_MODULE_VERSION}"));
    for dir in [&api, &machinery] {
        if !dir.is_dir() {
            return Err(Error::Missing(format!(
                "{} is not in the Go module cache (go mod download k8s.io/api@{K8S_MODULE_VERSION} k8s.io/apimachinery@{K8S_MODULE_VERSION})",
                dir.display()
            )));
        }
    }
    Ok([api, machinery])
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| input(format!("{}: {e}", path.display())))
}

/// Every directory under `dir` holding a `generated.proto`, sorted.
fn proto_dirs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    let entries = std::fs::read_dir(dir).map_err(|e| input(format!("{}: {e}", dir.display())))?;
    let mut subdirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| input(format!("{}: {e}", dir.display())))?;
        let path = entry.path();
        if path.is_dir() {
            subdirs.push(path);
        } else if path.file_name().is_some_and(|n| n == "generated.proto") {
            out.push(dir.to_path_buf());
        }
    }
    subdirs.sort();
    for sub in subdirs {
        proto_dirs(&sub, out)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// generated.proto

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    Single,
    Repeated,
    Map,
}

#[derive(Debug)]
struct ProtoField {
    label: Label,
    /// The value type (of a map: the value's; keys are strings).
    ty: String,
    name: String,
    number: u32,
}

#[derive(Debug)]
struct ProtoMessage {
    name: String,
    fields: Vec<ProtoField>,
}

#[derive(Debug)]
struct ProtoFile {
    package: String,
    go_package: String,
    messages: Vec<ProtoMessage>,
}

/// `name = 7` (options in brackets dropped) → (`name`, 7).
fn name_number(rest: &str, line: &str) -> Result<(String, u32), Error> {
    let rest = rest.split('[').next().unwrap_or_default();
    let (name, number) = rest
        .split_once('=')
        .ok_or_else(|| input(format!("no field number in `{line}`")))?;
    let number = number
        .trim()
        .parse()
        .map_err(|e| input(format!("field number in `{line}`: {e}")))?;
    Ok((name.trim().to_string(), number))
}

fn parse_proto(text: &str, file: &Path) -> Result<ProtoFile, Error> {
    let err = |what: String| input(format!("{}: {what}", file.display()));
    let mut package = None;
    let mut go_package = None;
    let mut messages = Vec::new();
    let mut current: Option<ProtoMessage> = None;
    let mut in_comment = false;
    for raw in text.lines() {
        let mut line = raw.split("//").next().unwrap_or_default().trim();
        if in_comment {
            match line.split_once("*/") {
                Some((_, rest)) => {
                    in_comment = false;
                    line = rest.trim();
                }
                None => continue,
            }
        }
        if let Some((before, after)) = line.split_once("/*") {
            if !after.contains("*/") {
                in_comment = true;
            }
            line = before.trim();
        }
        if line.is_empty() {
            continue;
        }
        if let Some(msg) = current.as_mut() {
            if line == "}" {
                messages.extend(current.take());
                continue;
            }
            let body = line
                .strip_suffix(';')
                .ok_or_else(|| err(format!("unexpected line in message {}: `{line}`", msg.name)))?;
            let field = if let Some(map) = body.strip_prefix("map<") {
                let (types, rest) = map
                    .split_once('>')
                    .ok_or_else(|| err(format!("bad map field `{line}`")))?;
                let (key, value) = types
                    .split_once(',')
                    .ok_or_else(|| err(format!("bad map field `{line}`")))?;
                if key.trim() != "string" {
                    return Err(err(format!("map key other than string in `{line}`")));
                }
                let (name, number) = name_number(rest, line)?;
                ProtoField {
                    label: Label::Map,
                    ty: value.trim().to_string(),
                    name,
                    number,
                }
            } else {
                let mut words = body.splitn(3, char::is_whitespace);
                let label = match words.next() {
                    Some("optional") => Label::Single,
                    Some("repeated") => Label::Repeated,
                    _ => {
                        return Err(err(format!(
                            "unexpected line in message {}: `{line}`",
                            msg.name
                        )));
                    }
                };
                let ty = words.next().unwrap_or_default().to_string();
                let (name, number) = name_number(words.next().unwrap_or_default(), line)?;
                ProtoField {
                    label,
                    ty,
                    name,
                    number,
                }
            };
            msg.fields.push(field);
        } else if let Some(rest) = line.strip_prefix("message ") {
            let name = rest.trim_end_matches('{').trim();
            if !rest.ends_with('{') {
                return Err(err(format!("unexpected message line `{line}`")));
            }
            current = Some(ProtoMessage {
                name: name.to_string(),
                fields: Vec::new(),
            });
        } else if let Some(rest) = line.strip_prefix("package ") {
            package = Some(rest.trim_end_matches(';').trim().to_string());
        } else if let Some(rest) = line.strip_prefix("option go_package") {
            go_package = Some(
                rest.trim_start_matches([' ', '='])
                    .trim_end_matches(';')
                    .trim()
                    .trim_matches('"')
                    .to_string(),
            );
        } else if line.starts_with("syntax") || line.starts_with("import ") {
        } else {
            return Err(err(format!("unexpected line `{line}`")));
        }
    }
    if current.is_some() {
        return Err(err("unterminated message".into()));
    }
    Ok(ProtoFile {
        package: package.ok_or_else(|| err("no package".into()))?,
        go_package: go_package.ok_or_else(|| err("no go_package".into()))?,
        messages,
    })
}

// ---------------------------------------------------------------------------------------------
// Go sources

#[derive(Debug, Default)]
struct GoField {
    /// Embedded (anonymous) field.
    embedded: bool,
    /// The Go type (`*int32`, `metav1.TypeMeta`).
    ty: String,
    /// The name in the `json` tag (empty: none, or an inlined embedded struct).
    json: String,
    /// `omitempty` or `omitzero` in the `json` tag.
    omit: bool,
    /// The field number in the `protobuf` tag.
    number: Option<u32>,
}

#[derive(Debug, Default)]
struct GoPackage {
    /// `const GroupName = "..."`.
    group: Option<String>,
    structs: HashMap<String, Vec<GoField>>,
    /// Named types that are not structs: `type ExtraValue []string`, `type MatchCondition
    /// v1.MatchCondition`.
    others: HashMap<String, String>,
    /// Import aliases (explicit, or the path's last element) → import paths.
    imports: HashMap<String, String>,
}

/// The value of `key:"..."` in a struct tag.
fn tag<'a>(tags: &'a str, key: &str) -> Option<&'a str> {
    let start = tags.find(&format!("{key}:\""))? + key.len() + 2;
    let len = tags[start..].find('"')?;
    Some(&tags[start..start + len])
}

fn parse_go(dir: &Path) -> Result<GoPackage, Error> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| input(format!("{}: {e}", dir.display())))? {
        let path = entry
            .map_err(|e| input(format!("{}: {e}", dir.display())))?
            .path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        if name.ends_with(".go")
            && !name.ends_with("_test.go")
            && !name.starts_with("zz_generated")
            && name != "generated.pb.go"
        {
            files.push(path);
        }
    }
    files.sort();
    let mut pkg = GoPackage::default();
    for file in files {
        let text = read(&file)?;
        let mut current: Option<(String, Vec<GoField>)> = None;
        let mut depth = 0usize;
        for raw in text.lines() {
            let line = raw.trim();
            if let Some((_, fields)) = current.as_mut() {
                if line.starts_with("//") {
                    continue;
                }
                // Braces are counted before the tag (or a trailing comment).
                let code = line.split("//").next().unwrap_or_default();
                let code = match line.find('`') {
                    Some(_) => line,
                    None => code,
                };
                let before_tag = code.split('`').next().unwrap_or_default();
                if depth == 1 && code.trim() == "}" {
                    if let Some((name, fields)) = current.take() {
                        pkg.structs.insert(name, fields);
                    }
                    depth = 0;
                    continue;
                }
                let opens = before_tag.matches('{').count();
                let closes = before_tag.matches('}').count();
                if depth == 1 && code.contains('`') {
                    let (pre, rest) = code.split_once('`').unwrap_or_default();
                    let tags = rest.split('`').next().unwrap_or_default();
                    let words: Vec<&str> = pre.split_whitespace().collect();
                    let (embedded, ty) = match words.as_slice() {
                        [ty] => (true, *ty),
                        [_, ty] => (false, *ty),
                        _ => (false, ""),
                    };
                    let json = tag(tags, "json").unwrap_or_default();
                    let mut parts = json.split(',');
                    let json_name = parts.next().unwrap_or_default().to_string();
                    let omit = parts.any(|p| p == "omitempty" || p == "omitzero");
                    let number = tag(tags, "protobuf")
                        .and_then(|p| p.split(',').nth(1))
                        .and_then(|n| n.parse().ok());
                    fields.push(GoField {
                        embedded,
                        ty: ty.to_string(),
                        json: json_name,
                        omit,
                        number,
                    });
                }
                depth = (depth + opens).saturating_sub(closes);
                continue;
            }
            let import = line.strip_prefix("import ").unwrap_or(line);
            if import.ends_with('"') && (import.starts_with('"') || import.contains(" \"")) {
                let path = import.rsplit('"').nth(1).unwrap_or_default();
                let alias = match import.split_once(' ') {
                    Some((alias, _)) if !alias.starts_with('"') => alias,
                    _ => path.rsplit('/').next().unwrap_or_default(),
                };
                pkg.imports.insert(alias.to_string(), path.to_string());
            }
            if let Some(rest) = line.strip_prefix("type ") {
                let mut words = rest.split_whitespace();
                let name = words.next().unwrap_or_default().to_string();
                let ty = words.next().unwrap_or_default();
                if ty == "struct" && rest.trim_end().ends_with('{') {
                    current = Some((name, Vec::new()));
                    depth = 1;
                } else if ty == "struct{}" {
                    pkg.structs.insert(name, Vec::new());
                } else if !ty.is_empty() {
                    pkg.others.insert(name, ty.to_string());
                }
            } else if let Some(rest) = line
                .strip_prefix("const GroupName = ")
                .or_else(|| line.strip_prefix("GroupName = "))
            {
                pkg.group = Some(rest.trim().trim_matches('"').to_string());
            }
        }
    }
    Ok(pkg)
}

// ---------------------------------------------------------------------------------------------
// The tables

/// The JSON shape of a message whose JSON form is custom, by its full proto name.
fn special_shape(full: &str) -> Option<&'static str> {
    Some(match full {
        "k8s.io.apimachinery.pkg.api.resource.Quantity"
        | "k8s.io.apimachinery.pkg.api.resource.QuantityValue" => "Quantity",
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => "IntOrString",
        "k8s.io.apimachinery.pkg.apis.meta.v1.Time" => "Time",
        "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime" => "MicroTime",
        "k8s.io.apimachinery.pkg.apis.meta.v1.Duration" => "Duration",
        "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1" => "RawJson",
        "k8s.io.apimachinery.pkg.runtime.RawExtension" => "RawExtension",
        _ => return None,
    })
}

/// `k8s.io.api.core.v1` → `CORE_V1`, `k8s.io.apimachinery.pkg.apis.meta.v1` → `META_V1`.
fn package_prefix(package: &str) -> String {
    let short = package
        .strip_prefix("k8s.io.api.")
        .or_else(|| package.strip_prefix("k8s.io.apimachinery.pkg.apis."))
        .or_else(|| package.strip_prefix("k8s.io.apimachinery.pkg."))
        .unwrap_or(package);
    short.replace('.', "_").to_ascii_uppercase()
}

/// `HTTPGetAction` → `HTTP_GET_ACTION`, `PodIP` → `POD_IP`.
fn screaming(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, c) in chars.iter().enumerate() {
        if i > 0 && c.is_ascii_uppercase() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next_lower)
            {
                out.push('_');
            }
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

struct Package {
    file: ProtoFile,
    go: GoPackage,
    /// The Go package's directory name's version part (`v1`).
    version: String,
}

/// Generate the Rust module from the modules in the Go module cache at `cache`.
pub fn generate(cache: &Path) -> Result<String, Error> {
    let [api, machinery] = modules(cache)?;
    let mut dirs = Vec::new();
    proto_dirs(&api, &mut dirs)?;
    for p in APIMACHINERY_PACKAGES {
        dirs.push(machinery.join(p));
    }
    let mut packages: BTreeMap<String, Package> = BTreeMap::new();
    for dir in &dirs {
        let proto = dir.join("generated.proto");
        let file = parse_proto(&read(&proto)?, &proto)?;
        let go = parse_go(dir)?;
        let version = file
            .go_package
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
        packages.insert(file.package.clone(), Package { file, go, version });
    }

    // Every message: its full name → (Rust static, package, message).
    let mut idents: BTreeMap<String, String> = BTreeMap::new();
    let mut taken = BTreeSet::new();
    for (name, pkg) in &packages {
        for m in &pkg.file.messages {
            let ident = format!("{}_{}", package_prefix(name), screaming(&m.name));
            if !taken.insert(ident.clone()) {
                return Err(input(format!("two messages are named {ident}")));
            }
            idents.insert(format!("{name}.{}", m.name), ident);
        }
    }

    let mut statics: BTreeMap<String, String> = BTreeMap::new();
    let mut kinds: BTreeSet<(String, String, String)> = BTreeSet::new();
    for (name, pkg) in &packages {
        for m in &pkg.file.messages {
            let full = format!("{name}.{}", m.name);
            let ident = &idents[&full];
            let mut out = String::new();
            let shape = match special_shape(&full) {
                Some(shape) => shape,
                None if pkg
                    .go
                    .others
                    .get(&m.name)
                    .is_some_and(|t| t.starts_with("[]"))
                    && m.fields.len() == 1
                    && m.fields[0].label == Label::Repeated
                    && m.fields[0].number == 1 =>
                {
                    "Items"
                }
                None => "Object",
            };
            let go_fields = pkg.go.structs.get(&m.name).or_else(|| {
                // `type MatchCondition v1.MatchCondition`: the other package's struct.
                let (alias, name) = pkg.go.others.get(&m.name)?.split_once('.')?;
                let path = pkg.go.imports.get(alias)?;
                let other = packages.values().find(|p| &p.file.go_package == path)?;
                other.go.structs.get(name)
            });
            if shape == "Object" && go_fields.is_none() {
                return Err(input(format!(
                    "{full}: no Go struct {} in {}",
                    m.name, pkg.file.go_package
                )));
            }
            if let (Some(group), Some(fields)) = (&pkg.go.group, go_fields) {
                let is_kind = fields
                    .iter()
                    .any(|f| f.embedded && (f.ty == "metav1.TypeMeta" || f.ty == "TypeMeta"));
                if is_kind {
                    let api_version = if group.is_empty() {
                        pkg.version.clone()
                    } else {
                        format!("{group}/{}", pkg.version)
                    };
                    kinds.insert((api_version, m.name.clone(), ident.clone()));
                }
            }
            writeln!(out, "pub(super) static {ident}: Message = Message {{").ok();
            writeln!(out, "    name: {:?},", m.name).ok();
            writeln!(out, "    shape: Shape::{shape},").ok();
            if m.fields.is_empty() {
                writeln!(out, "    fields: &[],").ok();
            } else {
                writeln!(out, "    fields: &[").ok();
                for f in &m.fields {
                    let ty = match f.ty.as_str() {
                        "string" => "Str".to_string(),
                        "int32" => "Int32".to_string(),
                        "int64" => "Int64".to_string(),
                        "bool" => "Bool".to_string(),
                        "bytes" => "Bytes".to_string(),
                        other => {
                            let target = match other.strip_prefix('.') {
                                Some(qualified) => qualified.to_string(),
                                None => format!("{name}.{other}"),
                            };
                            let target = idents.get(&target).ok_or_else(|| {
                                input(format!("{full}.{}: unknown type {other}", f.name))
                            })?;
                            format!("Msg(&{target})")
                        }
                    };
                    let go = go_fields.and_then(|g| g.iter().find(|g| g.number == Some(f.number)));
                    let (json, helper) = match (shape, go) {
                        ("Object", Some(go)) => {
                            let pointer = go.ty.starts_with('*');
                            let json = if !go.json.is_empty() {
                                go.json.clone()
                            } else {
                                f.name.clone()
                            };
                            let helper = match f.label {
                                Label::Repeated => "rep",
                                Label::Map => "map",
                                Label::Single if go.embedded && go.json.is_empty() => "inline",
                                Label::Single if pointer => "opt",
                                Label::Single if go.omit => "omit",
                                Label::Single => "keep",
                            };
                            (json, helper)
                        }
                        ("Object", None) => {
                            return Err(input(format!(
                                "{full}: no Go field with protobuf number {} ({})",
                                f.number, f.name
                            )));
                        }
                        (_, _) => (
                            f.name.clone(),
                            match f.label {
                                Label::Repeated => "rep",
                                Label::Map => "map",
                                Label::Single => "keep",
                            },
                        ),
                    };
                    writeln!(out, "        {helper}({}, {json:?}, {ty}),", f.number).ok();
                }
                writeln!(out, "    ],").ok();
            }
            writeln!(out, "}};").ok();
            statics.insert(ident.clone(), out);
        }
    }

    // Only the messages a kind reaches.
    let mut reached = BTreeSet::new();
    let mut todo: Vec<String> = kinds.iter().map(|(_, _, i)| i.clone()).collect();
    while let Some(ident) = todo.pop() {
        if !reached.insert(ident.clone()) {
            continue;
        }
        let text = &statics[&ident];
        for part in text.split("Msg(&").skip(1) {
            let target = part.split(')').next().unwrap_or_default();
            todo.push(target.to_string());
        }
    }
    statics.retain(|ident, _| reached.contains(ident));
    if let Some(text) = statics.values().find(|t| t.contains("Shape::Duration")) {
        return Err(input(format!(
            "a kind reaches metav1.Duration, which the decoder has no shape for yet: {text}"
        )));
    }

    let mut out = String::new();
    out.push_str(&format!(
        "//! The protobuf message tables of the built-in kinds: every message of the `generated.proto`
//! files of k8s.io/api {v} and of k8s.io/apimachinery {v}'s `pkg/apis/meta/v1`, `pkg/runtime`,
//! `pkg/util/intstr` and `pkg/api/resource`, with each field's number, type and label from the
//! proto file and its JSON name, zero-value rule (a pointer: `opt`; `omitempty`/`omitzero` on a
//! non-pointer: `omit`; `keep` otherwise) and inlining from the Go struct tags of the same packages.
//!
//! GENERATED by `tools/protobuf-tables`; do not edit. Regenerate with
//! `cargo run -p kcr-protobuf-tables` (it reads the modules from the Go module cache: `go mod
//! download k8s.io/api@{v} k8s.io/apimachinery@{v}` fetches them). `cargo test -p
//! kcr-protobuf-tables` fails when this file differs from what the generator produces.

use super::table::Ty::{{Bool, Bytes, Int32, Int64, Msg, Str}};
use super::table::{{Message, Shape, inline, keep, map, omit, opt, rep}};

/// The kinds: (apiVersion, kind, message). The structs that embed `TypeMeta`.
pub(super) static KINDS: &[(&str, &str, &Message)] = &[
",
        v = K8S_MODULE_VERSION
    ));
    for (api_version, kind, ident) in &kinds {
        writeln!(out, "    ({api_version:?}, {kind:?}, &{ident}),").ok();
    }
    out.push_str("];\n");
    for text in statics.values() {
        out.push('\n');
        out.push_str(text);
    }
    Ok(out)
}

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_screaming_snake_case() {
        assert_eq!(screaming("HTTPGetAction"), "HTTP_GET_ACTION");
        assert_eq!(screaming("PodIP"), "POD_IP");
        assert_eq!(screaming("CSIDriver"), "CSI_DRIVER");
        assert_eq!(screaming("V1beta1Thing"), "V1BETA1_THING");
        assert_eq!(package_prefix("k8s.io.api.core.v1"), "CORE_V1");
        assert_eq!(
            package_prefix("k8s.io.apimachinery.pkg.apis.meta.v1"),
            "META_V1"
        );
        assert_eq!(
            package_prefix("k8s.io.apimachinery.pkg.util.intstr"),
            "UTIL_INTSTR"
        );
    }

    #[test]
    fn proto_files_parse_with_comments_maps_and_references() {
        let text = r#"/*
Licence { with braces; }
*/
syntax = "proto2";
package k8s.io.api.apps.v1;
import "k8s.io/api/core/v1/generated.proto";
option go_package = "k8s.io/api/apps/v1";

// A message { in a comment; }
message Deployment {
  // +optional
  optional .k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;
  repeated string finalizers = 14;
  map<string, string> labels = 11;
  optional DeploymentSpec spec = 2;
}
"#;
        let file = parse_proto(text, Path::new("x.proto")).unwrap();
        assert_eq!(file.package, "k8s.io.api.apps.v1");
        assert_eq!(file.go_package, "k8s.io/api/apps/v1");
        let [m] = file.messages.as_slice() else {
            panic!("{:?}", file.messages)
        };
        let fields: Vec<_> = m
            .fields
            .iter()
            .map(|f| (f.label, f.ty.as_str(), f.name.as_str(), f.number))
            .collect();
        assert_eq!(
            fields,
            [
                (
                    Label::Single,
                    ".k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                    "metadata",
                    1
                ),
                (Label::Repeated, "string", "finalizers", 14),
                (Label::Map, "string", "labels", 11),
                (Label::Single, "DeploymentSpec", "spec", 2),
            ]
        );
        // What the parser does not know is an error, not a silently smaller table.
        assert!(parse_proto("message X {\n  oneof y {\n}\n", Path::new("x")).is_err());
        assert!(
            parse_proto(
                "message X {\n  map<int32, string> m = 1;\n}\n",
                Path::new("x")
            )
            .is_err()
        );
    }

    #[test]
    fn go_struct_tags_give_names_pointers_omitempty_and_inlining() {
        let dir = std::env::temp_dir().join(format!("kcr-protobuf-tables-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("types.go"),
            r#"package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const GroupName = "apps"

// Thing is a kind. A comment with `backticks` and { braces }.
type Thing struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object's metadata { not a brace that counts }
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Replicas *int32 `json:"replicas,omitempty" protobuf:"varint,2,opt,name=replicas"`
	Port int32 `json:"port" protobuf:"varint,3,opt,name=port"` // trailing { comment
	Source `json:"" protobuf:"bytes,4,opt,name=source"`
}

type Values []string
"#,
        )
        .unwrap();
        let pkg = parse_go(&dir).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(pkg.group.as_deref(), Some("apps"));
        assert_eq!(pkg.others["Values"], "[]string");
        assert_eq!(
            pkg.imports["metav1"],
            "k8s.io/apimachinery/pkg/apis/meta/v1"
        );
        let fields: Vec<_> = pkg.structs["Thing"]
            .iter()
            .map(|f| (f.embedded, f.ty.as_str(), f.json.as_str(), f.omit, f.number))
            .collect();
        assert_eq!(
            fields,
            [
                (true, "metav1.TypeMeta", "", false, None),
                (true, "metav1.ObjectMeta", "metadata", true, Some(1)),
                (false, "*int32", "replicas", true, Some(2)),
                (false, "int32", "port", false, Some(3)),
                (true, "Source", "", false, Some(4)),
            ]
        );
    }
}
