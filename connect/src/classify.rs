//! What a request is, for its bounds: a watch (and whether it asked for bookmarks), a stream
//! that may stay quiet by design (a followed log, an upgraded exec/attach/port-forward
//! connection), or an ordinary request.

use std::time::Duration;

use http::Request;

use crate::options::{ConnectionOptions, WATCH_TIMEOUT_MARGIN};

/// The kind of a request, with the bounds that apply to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// An ordinary request: its headers within `request_timeout`, its body never silent longer.
    Request,
    /// A watch: started within `watch_start_timeout`, then silent at most `idle`.
    Watch {
        /// The silence allowed once started.
        idle: Duration,
    },
    /// A stream quiet by design (a followed log, an upgraded connection): its headers within
    /// `request_timeout`; its body is bounded by the connection's liveness (HTTP/2 PINGs)
    /// only.
    Stream,
}

impl Class {
    /// The class of `request` under `options`.
    pub(crate) fn of<B>(request: &Request<B>, options: &ConnectionOptions) -> Class {
        let query = request.uri().query().unwrap_or_default();
        let param = |name: &str| {
            query.split('&').find_map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                (key == name).then_some(value)
            })
        };
        let truthy = |name: &str| param(name).is_some_and(|v| v == "true" || v == "1");
        if truthy("watch") {
            let idle = if truthy("allowWatchBookmarks") {
                options.watch_idle_timeout
            } else {
                param("timeoutSeconds")
                    .and_then(|v| v.parse::<u64>().ok())
                    .filter(|s| *s > 0)
                    .map(|s| Duration::from_secs(s) + WATCH_TIMEOUT_MARGIN)
                    .unwrap_or(options.watch_idle_timeout)
            };
            return Class::Watch { idle };
        }
        let path = request.uri().path();
        let upgrade = request.headers().contains_key(http::header::UPGRADE)
            || ["/exec", "/attach", "/portforward"]
                .iter()
                .any(|s| path.ends_with(s));
        if upgrade || (path.ends_with("/log") && truthy("follow")) {
            return Class::Stream;
        }
        Class::Request
    }
}

/// `METHOD path?query` of a request, for logs and errors.
pub(crate) fn describe<B>(request: &Request<B>) -> String {
    let uri = request.uri();
    let path = uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or_else(|| uri.path());
    format!("{} {path}", request.method())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(uri: &str) -> Class {
        let request = Request::get(uri).body(()).unwrap();
        Class::of(&request, &ConnectionOptions::default())
    }

    #[test]
    fn watches_are_bounded_by_bookmarks_or_their_own_timeout() {
        let options = ConnectionOptions::default();
        assert_eq!(
            class("/api/v1/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=290"),
            Class::Watch {
                idle: options.watch_idle_timeout
            }
        );
        assert_eq!(
            class("/api/v1/pods?watch=1&timeoutSeconds=20"),
            Class::Watch {
                idle: Duration::from_secs(20) + WATCH_TIMEOUT_MARGIN
            }
        );
        assert_eq!(
            class("/api/v1/pods?watch=true"),
            Class::Watch {
                idle: options.watch_idle_timeout
            },
            "a watch naming no bound still gets one"
        );
        assert_eq!(
            class("/api/v1/pods?watch=false"),
            Class::Request,
            "watch=false is a list"
        );
    }

    #[test]
    fn quiet_streams_and_ordinary_requests() {
        assert_eq!(
            class("/api/v1/namespaces/a/pods/p/log?follow=true"),
            Class::Stream
        );
        assert_eq!(
            class("/api/v1/namespaces/a/pods/p/log"),
            Class::Request,
            "a log that is not followed ends"
        );
        assert_eq!(
            class("/api/v1/namespaces/a/pods/p/exec?command=sh"),
            Class::Stream
        );
        assert_eq!(class("/api/v1/namespaces/a/configmaps"), Class::Request);
    }

    #[test]
    fn a_request_is_described_by_method_path_and_query() {
        let request = Request::put("/apis/coordination.k8s.io/v1/namespaces/a/leases/l?x=1")
            .body(())
            .unwrap();
        assert_eq!(
            describe(&request),
            "PUT /apis/coordination.k8s.io/v1/namespaces/a/leases/l?x=1"
        );
    }
}
