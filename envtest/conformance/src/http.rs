//! Raw HTTP to a backend: the scripted request as is, the answer as bytes (or watch events).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::exchange::{Body, Request};

/// How long a watch is read at most (its `timeoutSeconds` normally ends it first).
pub const WATCH_DEADLINE: Duration = Duration::from_secs(8);
/// How long a non-watch request may take.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(30);

/// An answer.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// HTTP status code (0: no answer, see `error`).
    pub code: u16,
    /// `Content-Type` header.
    pub content_type: String,
    /// The body as text.
    pub raw: String,
    /// The body as JSON, when it is JSON.
    pub json: Option<Value>,
    /// For a watch: the events, in order.
    pub events: Vec<Value>,
    /// A transport error instead of an answer.
    pub error: Option<String>,
}

/// A plain-HTTP client for one backend, with the variables of its script.
#[derive(Debug, Clone)]
pub struct Conn {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
    /// Variables (`{name}` placeholders); `ns` is the current area's namespace.
    pub vars: HashMap<String, String>,
}

fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Conn {
    /// A client for `base` (`http://127.0.0.1:PORT`).
    pub fn new(base: &str) -> Conn {
        Conn {
            client: Client::builder(TokioExecutor::new()).build_http(),
            base: base.trim_end_matches('/').to_string(),
            vars: HashMap::new(),
        }
    }

    /// `s` with `{var}` placeholders replaced (unknown ones are left as they are).
    pub fn subst(&self, s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(i) = rest.find('{') {
            out.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            match after.find('}') {
                Some(j)
                    if j > 0
                        && after[..j]
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_')
                        && self.vars.contains_key(&after[..j]) =>
                {
                    out.push_str(&self.vars[&after[..j]]);
                    rest = &after[j + 1..];
                }
                _ => {
                    out.push('{');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// Send `req`; for a watch, then run `during` and read events until the stream ends or
    /// [`WATCH_DEADLINE`].
    pub async fn send(&self, req: &Request, during: &[Request]) -> Answer {
        match self.try_send(req, during).await {
            Ok(a) => a,
            Err(e) => Answer {
                error: Some(e),
                ..Answer::default()
            },
        }
    }

    /// Open a watch (`req` must ask for one) and read its events until one satisfies `stop`
    /// (included), the stream ends, or `deadline` passes.
    pub async fn watch_until(
        &self,
        req: &Request,
        stop: impl Fn(&Value) -> bool,
        deadline: Duration,
    ) -> Answer {
        let start = Instant::now();
        let request = match self.build(req) {
            Ok(r) => r,
            Err(e) => {
                return Answer {
                    error: Some(e),
                    ..Answer::default()
                };
            }
        };
        let resp = match tokio::time::timeout(deadline, self.client.request(request)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                return Answer {
                    error: Some(e.to_string()),
                    ..Answer::default()
                };
            }
            Err(_) => {
                return Answer {
                    error: Some("no watch answer in time".into()),
                    ..Answer::default()
                };
            }
        };
        let mut answer = Answer {
            code: resp.status().as_u16(),
            ..Answer::default()
        };
        let mut body = resp.into_body();
        let mut pending = Vec::new();
        'read: loop {
            let left = deadline.saturating_sub(start.elapsed());
            let frame = match tokio::time::timeout(left, body.frame()).await {
                Ok(Some(Ok(f))) => f,
                _ => break,
            };
            let Some(d) = frame.data_ref() else { continue };
            pending.extend_from_slice(d);
            while let Some(i) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=i).collect();
                let text = String::from_utf8_lossy(&line);
                if text.trim().is_empty() {
                    continue;
                }
                let ev = serde_json::from_str(&text)
                    .unwrap_or_else(|e| Value::String(format!("undecodable event: {e}")));
                let done = stop(&ev);
                answer.events.push(ev);
                if done {
                    break 'read;
                }
            }
        }
        answer
    }

    fn build(&self, req: &Request) -> Result<http::Request<Full<Bytes>>, String> {
        let mut uri = format!("{}{}", self.base, self.subst(&req.path));
        if !req.query.is_empty() {
            let q: Vec<String> = req
                .query
                .iter()
                .map(|(k, v)| format!("{}={}", k, encode(&self.subst(v))))
                .collect();
            uri = format!("{uri}?{}", q.join("&"));
        }
        let mut b = http::Request::builder()
            .method(req.method.as_str())
            .uri(&uri);
        let mut has_ct = false;
        let mut has_accept = false;
        for (k, v) in &req.headers {
            has_ct |= k.eq_ignore_ascii_case("content-type");
            has_accept |= k.eq_ignore_ascii_case("accept");
            b = b.header(k.as_str(), self.subst(v));
        }
        if !has_accept {
            b = b.header("Accept", "application/json");
        }
        let body = match &req.body {
            None => Bytes::new(),
            Some(Body::Json(v)) => Bytes::from(self.subst(&v.to_string())),
            Some(Body::Text(t)) => Bytes::from(self.subst(t)),
            Some(Body::Protobuf(v)) => {
                let json: serde_json::Value = serde_json::from_str(&self.subst(&v.to_string()))
                    .map_err(|e| format!("the body is not JSON after substitution: {e}"))?;
                let bytes = kcr_envtest::protobuf::encode(&json)
                    .ok_or_else(|| format!("no protobuf message for this body: {json}"))?;
                if !has_ct {
                    b = b.header("Content-Type", "application/vnd.kubernetes.protobuf");
                    has_ct = true;
                }
                Bytes::from(bytes)
            }
        };
        if req.body.is_some() && !has_ct {
            b = b.header("Content-Type", "application/json");
        }
        b.body(Full::new(body)).map_err(|e| e.to_string())
    }

    async fn try_send(&self, req: &Request, during: &[Request]) -> Result<Answer, String> {
        let request = self.build(req)?;
        let watch = req.is_watch();
        let deadline = if watch {
            WATCH_DEADLINE
        } else {
            REQUEST_DEADLINE
        };
        let resp = tokio::time::timeout(deadline, self.client.request(request))
            .await
            .map_err(|_| format!("no answer within {deadline:?}"))?
            .map_err(|e| e.to_string())?;
        let code = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let mut body = resp.into_body();
        let start = Instant::now();
        if watch && code == 200 {
            for d in during {
                // Answers of these are not compared.
                let _ = Box::pin(self.send(d, &[])).await;
            }
        }
        let mut bytes = Vec::new();
        loop {
            let left = deadline.saturating_sub(start.elapsed());
            match tokio::time::timeout(left, body.frame()).await {
                Err(_) => break,
                Ok(None) => break,
                Ok(Some(Err(e))) => {
                    if watch {
                        break;
                    }
                    return Err(e.to_string());
                }
                Ok(Some(Ok(f))) => {
                    if let Some(d) = f.data_ref() {
                        bytes.extend_from_slice(d);
                    }
                }
            }
        }
        let raw = String::from_utf8_lossy(&bytes).into_owned();
        let mut answer = Answer {
            code,
            content_type,
            json: None,
            events: Vec::new(),
            raw: String::new(),
            error: None,
        };
        if watch && code == 200 {
            let stream = serde_json::Deserializer::from_str(&raw).into_iter::<Value>();
            for ev in stream {
                match ev {
                    Ok(v) => answer.events.push(v),
                    Err(e) => {
                        answer
                            .events
                            .push(Value::String(format!("undecodable event: {e}")));
                        break;
                    }
                }
            }
        } else {
            answer.json = serde_json::from_str(&raw).ok();
        }
        answer.raw = raw;
        Ok(answer)
    }
}
