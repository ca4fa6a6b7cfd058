//! Decoding request bodies: JSON or YAML objects (protobuf ones are turned into JSON before,
//! see [`decode_protobuf`]), the check of their apiVersion and kind against the route, and what
//! the real server does to a built-in kind's body when it decodes it (a Secret's
//! `stringData`).

use bytes::Bytes;
use serde_json::{Value, json};

use super::route::Route;
use crate::error::ApiError;
use crate::resources::ResourceType;

/// A request body of media type `content_type` as JSON bytes: protobuf bodies of built-in kinds
/// (and `DeleteOptions`) are decoded ([`crate::protobuf`]); protobuf bodies of other kinds and
/// CBOR bodies are 415, a body that is not well-formed protobuf is a 400, as upstream.
pub(crate) fn decode_protobuf(content_type: &str, body: Bytes) -> Result<Bytes, ApiError> {
    let media = content_type.to_ascii_lowercase();
    if body.is_empty() {
        return Ok(body);
    }
    if media.contains("protobuf") {
        return match crate::protobuf::decode(&body) {
            Ok(v) => Ok(Bytes::from(serde_json::to_vec(&v).unwrap_or_default())),
            Err(crate::protobuf::DecodeError::Unsupported(e)) => {
                let mut err = ApiError::unsupported_media_type(&WRITE_MEDIA_TYPES);
                err.message = format!("{}: {e}", err.message);
                Err(err)
            }
            Err(crate::protobuf::DecodeError::Malformed(e)) => Err(ApiError::bad_request(format!(
                "the object provided is unrecognized: {e}"
            ))),
        };
    }
    if media.contains("cbor") {
        return Err(ApiError::unsupported_media_type(&WRITE_MEDIA_TYPES));
    }
    Ok(body)
}

/// Whether the client prefers protobuf answers: `application/vnd.kubernetes.protobuf` is the
/// first media type its `Accept` lists, as Go clients list it, for the object itself or (client-go's
/// metadata client) as `PartialObjectMetadata`; a Table is answered in JSON.
pub(crate) fn wants_protobuf(accept: Option<&str>) -> bool {
    let first = accept
        .unwrap_or_default()
        .split(',')
        .next()
        .unwrap_or_default();
    let mut params = first.split(';').map(str::trim);
    params
        .next()
        .is_some_and(|m| m.eq_ignore_ascii_case("application/vnd.kubernetes.protobuf"))
        && params.all(|p| {
            !p.starts_with("as=")
                || p == "as=PartialObjectMetadata"
                || p == "as=PartialObjectMetadataList"
        })
}

/// A JSON answer of a built-in kind (an object, a list, a Status) re-encoded as protobuf
/// ([`crate::protobuf::encode`]), as kube-apiserver answers a client that prefers protobuf; any
/// other answer (a custom resource, which upstream answers in JSON too) unchanged.
pub(crate) async fn protobuf_answer(
    resp: http::Response<super::Body>,
) -> http::Response<super::Body> {
    use http_body_util::{BodyExt, Full};
    let is_json = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v == "application/json");
    if !is_json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let bytes = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(never) => match never {},
    };
    let encoded = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| crate::protobuf::encode(&v));
    let body = match encoded {
        Some(pb) => {
            parts.headers.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/vnd.kubernetes.protobuf"),
            );
            parts.headers.remove(http::header::CONTENT_LENGTH);
            Bytes::from(pb)
        }
        None => bytes,
    };
    http::Response::from_parts(
        parts,
        Full::new(body).map_err(|never| match never {}).boxed(),
    )
}

/// A JSON watch stream of a built-in kind as a protobuf one
/// (`application/vnd.kubernetes.protobuf;stream=watch`: one length-delimited `WatchEvent` frame
/// per event line, [`crate::protobuf::watch_frame`]); an answer that is not a stream (an error
/// Status) as [`protobuf_answer`] has it.
pub(crate) async fn protobuf_watch(
    resp: http::Response<super::Body>,
) -> http::Response<super::Body> {
    use futures::StreamExt as _;
    use http_body_util::{BodyExt, StreamBody};
    if resp.status() != http::StatusCode::OK {
        return protobuf_answer(resp).await;
    }
    let (mut parts, body) = resp.into_parts();
    parts.headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/vnd.kubernetes.protobuf;stream=watch"),
    );
    let state = (body.into_data_stream(), bytes::BytesMut::new());
    let frames = futures::stream::unfold(state, |(mut stream, mut buf)| async move {
        loop {
            // Every complete event line buffered so far, as one chunk of frames.
            let mut out = Vec::new();
            while let Some(end) = buf.iter().position(|b| *b == b'\n') {
                let line = buf.split_to(end + 1);
                match crate::protobuf::watch_frame(&line[..end]) {
                    Some(frame) => out.extend(frame),
                    None => tracing::warn!("a watch event not encoded as protobuf was left out"),
                }
            }
            if !out.is_empty() {
                let frame = hyper::body::Frame::data(Bytes::from(out));
                return Some((Ok::<_, std::convert::Infallible>(frame), (stream, buf)));
            }
            match stream.next().await {
                Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                Some(Err(never)) => match never {},
                None => return None,
            }
        }
    });
    http::Response::from_parts(parts, BodyExt::boxed(StreamBody::new(frames)))
}

/// The media types a create or update body may have (the real server's list, in its order).
pub(crate) const WRITE_MEDIA_TYPES: [&str; 3] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

/// 415 unless `content_type` is one of [`WRITE_MEDIA_TYPES`] (parameters such as `charset`
/// aside); no `Content-Type` reads as JSON, as upstream.
pub(crate) fn check_write_media_type(content_type: &str) -> Result<(), ApiError> {
    let media = crate::patch::media_type(content_type);
    if media.is_empty() || WRITE_MEDIA_TYPES.contains(&media.as_str()) {
        Ok(())
    } else {
        Err(ApiError::unsupported_media_type(&WRITE_MEDIA_TYPES))
    }
}

/// A JSON (or YAML) object body for an object of `kind`; 400 when empty or not decodable,
/// in the real server's words (the JSON syntax error as Go words it, then the start of the
/// body).
pub(crate) fn parse_body(body: &[u8], kind: &str) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("request body is empty"));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => Ok(v),
        Err(json_err) => serde_saphyr::from_slice::<Value>(body).map_err(|_| {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; json parse error: {} ({})",
                crate::json::go_syntax_error(body, &json_err),
                summarize(body)
            ))
        }),
    }
}

/// The start of a body as upstream's decode errors quote it (30 bytes, then ` ...`).
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    if body.len() > MAX {
        format!("{} ...", String::from_utf8_lossy(&body[..MAX]))
    } else {
        String::from_utf8_lossy(body).into_owned()
    }
}

/// Check apiVersion/kind of a body against the route and fill them in when absent. The object
/// stays in the route's version until it is stored ([`super::conversion::into_storage`]).
pub(crate) fn check_type(route: &Route, obj: &mut Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    let t = &route.t;
    let want_av = t.api_version(&route.version);
    match obj["apiVersion"].as_str() {
        None | Some("") => obj["apiVersion"] = json!(want_av),
        Some(av) if av == want_av => {}
        Some(av) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({want_av})"
            )));
        }
    }
    match obj["kind"].as_str() {
        None | Some("") => obj["kind"] = json!(t.kind),
        Some(k) if k == t.kind => {}
        Some(k) => return Err(wrong_kind(route, obj, k)),
    }
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    Ok(())
}

/// The real server's answer to a body of another kind than the route's: for a custom
/// resource, 422 on the field `kind`; for a built-in, the decoder's 400 (another kind of the
/// group cannot be converted, a kind the group does not have is not registered).
fn wrong_kind(route: &Route, obj: &Value, kind: &str) -> ApiError {
    let t = &route.t;
    if t.custom.is_some() {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        return ApiError::invalid(
            &t.group,
            kind,
            name,
            vec![(
                "kind".into(),
                "FieldValueInvalid".into(),
                format!("Invalid value: {kind:?}: must be {}", t.kind),
            )],
        );
    }
    let api_version = t.api_version(&route.version);
    let registered = crate::resources::kinds::KINDS
        .iter()
        .any(|k| k.group == t.group && k.kind == kind)
        || crate::resources::kinds::lists(&t.group, kind).is_some();
    let why = if registered {
        // Go package names: `v1` for the versioned type, the group's first label (`core`
        // for the core group) for the internal one.
        let internal = t
            .group
            .split('.')
            .next()
            .filter(|g| !g.is_empty())
            .unwrap_or("core");
        format!(
            "converting ({}.{kind}) to ({internal}.{}): unknown conversion",
            route.version, t.kind
        )
    } else {
        format!(
            "no kind {kind:?} is registered for version {api_version:?} in scheme \"pkg/runtime/scheme.go:111\""
        )
    };
    ApiError::bad_request(format!(
        "{kind} in version {:?} cannot be handled as a {}: {why}",
        route.version, t.kind
    ))
}

/// What the real server does to a built-in kind's body when it decodes it, before admission,
/// whatever the body's encoding: a Secret's `stringData` is merged into `data` (base64, a
/// `stringData` key wins) and dropped, and a Secret without a type is `Opaque`. A
/// `stringData` value that is not a string is a 400, as upstream.
pub(crate) fn decode_builtin(route: &Route, obj: &mut Value) -> Result<(), ApiError> {
    use base64::Engine;
    let t = &route.t;
    if t.custom.is_some() || !t.group.is_empty() || t.kind != "Secret" {
        return Ok(());
    }
    let Some(map) = obj.as_object_mut() else {
        return Ok(());
    };
    if let Some(Value::Object(string_data)) = map.remove("stringData") {
        let data = map
            .entry("data")
            .or_insert_with(|| Value::Object(Default::default()));
        if !data.is_object() {
            *data = Value::Object(Default::default());
        }
        if let Value::Object(data) = data {
            for (k, v) in string_data {
                let Some(text) = v.as_str() else {
                    return Err(ApiError::bad_request(format!(
                        "Secret in version \"v1\" cannot be handled as a Secret: {}",
                        not_a_string_data_value(&v)
                    )));
                };
                data.insert(
                    k,
                    json!(base64::engine::general_purpose::STANDARD.encode(text)),
                );
            }
        }
    }
    if map
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        map.insert("type".into(), json!("Opaque"));
    }
    Ok(())
}

/// Go's JSON decoding error for a `stringData` value that is not a string.
fn not_a_string_data_value(v: &Value) -> String {
    let json_type = match v {
        Value::Null | Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    format!(
        "json: cannot unmarshal {json_type} into Go struct field Secret.stringData of type string"
    )
}

/// The real server decodes a patched object into its Go type: a patched Secret whose
/// `stringData` holds a value that is not a string fails that decoding, which it reports as
/// 422 Invalid on the field `patch` (a create with such a body is a 400, see
/// [`decode_builtin`]).
pub(crate) fn check_patched_builtin(t: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    if t.custom.is_some() || !t.group.is_empty() || t.kind != "Secret" {
        return Ok(());
    }
    let Some(Value::Object(string_data)) = obj.get("stringData") else {
        return Ok(());
    };
    let Some(bad) = string_data.values().find(|v| !v.is_string()) else {
        return Ok(());
    };
    let message = format!(
        "Invalid value: {}: {}",
        Value::String(obj.to_string()),
        not_a_string_data_value(bad)
    );
    Err(ApiError::invalid(
        "",
        "",
        "",
        vec![("patch".into(), "FieldValueInvalid".into(), message)],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_json_or_yaml_objects() {
        assert_eq!(
            parse_body(br#"{"a": 1}"#, "ConfigMap").unwrap(),
            json!({"a": 1})
        );
        assert_eq!(
            parse_body(b"kind: ConfigMap\ndata:\n  k: v\n", "ConfigMap").unwrap(),
            json!({"kind": "ConfigMap", "data": {"k": "v"}})
        );
        assert_eq!(parse_body(b"", "ConfigMap").unwrap_err().code, 400);
        let err = parse_body(b"{not json", "ConfigMap").unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: invalid character 'n' looking for beginning of object key string ({not json)"
        );
    }

    #[test]
    fn protobuf_answers_go_to_clients_listing_it_first() {
        assert!(wants_protobuf(Some(
            "application/vnd.kubernetes.protobuf, application/json"
        )));
        assert!(wants_protobuf(Some("application/vnd.kubernetes.protobuf")));
        assert!(!wants_protobuf(Some(
            "application/json, application/vnd.kubernetes.protobuf"
        )));
        assert!(!wants_protobuf(Some(
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/json"
        )));
        assert!(wants_protobuf(Some(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
        )));
        assert!(!wants_protobuf(Some("*/*")));
        assert!(!wants_protobuf(None));
    }

    #[test]
    fn cbor_and_unknown_protobuf_are_refused() {
        let body = Bytes::from_static(b"\xa1\x61\x61\x01");
        assert_eq!(
            decode_protobuf("application/cbor", body.clone())
                .unwrap_err()
                .code,
            415
        );
        assert_eq!(
            decode_protobuf("application/json", body.clone()).unwrap(),
            body
        );
        assert!(decode_protobuf("application/vnd.kubernetes.protobuf", Bytes::new()).is_ok());
        assert!(decode_protobuf("application/vnd.kubernetes.protobuf", body).is_err());
    }
}
