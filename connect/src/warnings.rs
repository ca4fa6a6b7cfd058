//! The API server's warnings: the `Warning` response headers kube-apiserver sends for a
//! deprecated API version, an unknown field under `fieldValidation=Warn` (the default), a
//! finalizer name without a domain, or an admission webhook's `warnings`. kube-rs drops them;
//! a client from [`client`](crate::client) or [`bound`](crate::bound) logs them at `WARN`, as
//! client-go's and controller-runtime's clients do, and counts them.
//!
//! [`ApiWarnings`] chooses how: each distinct message once per client (the default, as
//! controller-runtime's deduplicating warning logger), every one, or none. Every warning is
//! counted in `kcr_client_api_warnings_total{host}` whatever the choice, so a dashboard shows
//! a deprecated API still in use.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderMap, Request, Response};
use parking_lot::Mutex;
use tower::{Layer, Service};

/// `kcr_client_api_warnings_total`: the warnings the API server sent, by `host`.
pub const API_WARNINGS_TOTAL: &str = "kcr_client_api_warnings_total";

/// How many distinct messages a client remembers for [`ApiWarnings::Deduplicated`]; past it,
/// the memory starts afresh (a message may then be logged once more), so that a server that
/// puts a name in every warning cannot grow it without bound.
pub const REMEMBERED_WARNINGS: usize = 1024;

/// What a client does with the API server's warnings (each is counted in
/// [`API_WARNINGS_TOTAL`] either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiWarnings {
    /// Log each distinct message once per client (the default).
    #[default]
    Deduplicated,
    /// Log every warning of every response.
    Every,
    /// Log nothing.
    Ignore,
}

/// The text of one `Warning` header value, `299 - "text"` (RFC 7234's `warn-code warn-agent
/// warn-text [warn-date]`, the form kube-apiserver sends): the unquoted, unescaped text. A
/// value in another form is returned whole, trimmed, so that nothing the server said is lost.
pub fn warning_text(value: &str) -> String {
    parse_quoted_warning(value).unwrap_or_else(|| value.trim().to_string())
}

fn parse_quoted_warning(value: &str) -> Option<String> {
    let value = value.trim();
    let (code, rest) = value.split_once(' ')?;
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (_agent, rest) = rest.trim_start().split_once(' ')?;
    let mut chars = rest.trim_start().chars();
    if chars.next()? != '"' {
        return None;
    }
    let mut text = String::new();
    loop {
        match chars.next()? {
            '\\' => text.push(chars.next()?),
            '"' => return Some(text),
            c => text.push(c),
        }
    }
}

/// The messages a client has logged (for [`ApiWarnings::Deduplicated`]).
#[derive(Debug, Default)]
struct Seen {
    messages: HashSet<String>,
}

impl Seen {
    /// Whether `text` is new (and now remembered).
    fn first_time(&mut self, text: &str) -> bool {
        if self.messages.contains(text) {
            return false;
        }
        if self.messages.len() >= REMEMBERED_WARNINGS {
            self.messages.clear();
        }
        self.messages.insert(text.to_string());
        true
    }
}

/// The part of a client that handles warnings: shared by every clone of its layer and service.
#[derive(Debug)]
struct Warnings {
    mode: ApiWarnings,
    host: String,
    seen: Mutex<Seen>,
}

impl Warnings {
    fn observe(&self, headers: &HeaderMap) {
        for value in headers.get_all(http::header::WARNING) {
            let text = warning_text(&String::from_utf8_lossy(value.as_bytes()));
            metrics::counter!(API_WARNINGS_TOTAL, "host" => self.host.clone()).increment(1);
            let log = match self.mode {
                ApiWarnings::Ignore => false,
                ApiWarnings::Every => true,
                ApiWarnings::Deduplicated => self.seen.lock().first_time(&text),
            };
            if log {
                tracing::warn!(host = %self.host, warning = %text, "the API server warns: {text}");
            }
        }
    }
}

/// A tower layer that logs and counts the API server's warnings on every response (see the
/// [module docs](self)). [`client`](crate::client) and [`bound`](crate::bound) put it in their
/// stacks; one layer (and its clones) remembers the messages it logged.
#[derive(Debug, Clone)]
pub struct WarningLayer {
    warnings: Arc<Warnings>,
}

impl WarningLayer {
    /// A layer handling warnings as `mode` says; `host` names the server in logs and metrics.
    pub fn new(mode: ApiWarnings, host: impl Into<String>) -> Self {
        let host = host.into();
        metrics::describe_counter!(
            API_WARNINGS_TOTAL,
            "Warnings the API server sent in response headers (deprecated APIs, unknown fields)"
        );
        metrics::counter!(API_WARNINGS_TOTAL, "host" => host.clone()).increment(0);
        WarningLayer {
            warnings: Arc::new(Warnings {
                mode,
                host,
                seen: Mutex::default(),
            }),
        }
    }
}

impl<S> Layer<S> for WarningLayer {
    type Service = WarningService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WarningService {
            inner,
            warnings: self.warnings.clone(),
        }
    }
}

/// The service of a [`WarningLayer`].
#[derive(Debug, Clone)]
pub struct WarningService<S> {
    inner: S,
    warnings: Arc<Warnings>,
}

impl<S, B, RB> Service<Request<B>> for WarningService<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = WarningFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        WarningFuture {
            inner: self.inner.call(request),
            warnings: self.warnings.clone(),
        }
    }
}

/// The response future of a [`WarningService`]: the inner one, whose response headers are
/// read for warnings when it is ready.
#[pin_project::pin_project]
#[derive(Debug)]
pub struct WarningFuture<F> {
    #[pin]
    inner: F,
    warnings: Arc<Warnings>,
}

impl<F, RB, E> Future for WarningFuture<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
{
    type Output = Result<Response<RB>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let output = std::task::ready!(this.inner.poll(cx));
        if let Ok(response) = &output {
            this.warnings.observe(response.headers());
        }
        Poll::Ready(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_headers_are_unquoted_and_unescaped() {
        assert_eq!(
            warning_text(r#"299 - "unknown field \"spec.foo\"""#),
            r#"unknown field "spec.foo""#
        );
        assert_eq!(
            warning_text(
                r#"299 - "policy/v1beta1 PodSecurityPolicy is deprecated" "Mon, 07 Dec 2026 12:00:00 GMT""#
            ),
            "policy/v1beta1 PodSecurityPolicy is deprecated"
        );
        // Anything else is kept whole.
        for raw in [
            "just text",
            "299 -",
            r#"299 - "unterminated"#,
            r#"2x9 - "x""#,
        ] {
            assert_eq!(warning_text(raw), raw.trim(), "{raw}");
        }
    }

    #[test]
    fn each_message_is_remembered_once_and_the_memory_is_bounded() {
        let mut seen = Seen::default();
        assert!(seen.first_time("a"));
        assert!(!seen.first_time("a"));
        assert!(seen.first_time("b"));
        for i in 0..REMEMBERED_WARNINGS {
            seen.first_time(&format!("m{i}"));
        }
        assert!(seen.messages.len() <= REMEMBERED_WARNINGS);
    }
}
