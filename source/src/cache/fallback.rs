//! A streaming-list watch that falls back to paged lists when the API server refuses it.
//!
//! A server without WatchList (before Kubernetes 1.34, or with the feature gate off) answers a
//! watch with `sendInitialEvents=true` with `400 Bad Request` or `422 Invalid`. kube-runtime's
//! watcher retries that forever, so a cache asked for a streaming list would never sync there.
//! [`streaming_or_paged`] watches with the streaming stream until it delivers its first event;
//! if instead its first result is such a refusal, it passes the error on once (the cache's
//! watch-error hook and logs see it) and from then on serves a paged list + watch of the same
//! scope. Any other error (a 5xx, a dropped connection, a 403) is retried by the streaming
//! watch as usual, and once a streaming list has started the watch never changes mode.

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A boxed watcher stream.
pub(crate) type WatchStream<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

/// Whether `error` is the API server refusing a streaming list (it does not serve WatchList).
pub(crate) fn refuses_streaming_list(error: &watcher::Error) -> bool {
    let code = match error {
        watcher::Error::WatchStartFailed(kube::Error::Api(status)) => status.code,
        watcher::Error::WatchError(status) => status.code,
        _ => return false,
    };
    code == 400 || code == 422
}

/// `streaming` until it yields its first event, or `paged` for good once its first result is a
/// refusal of streaming lists (see the [module docs](self)). Neither stream does anything
/// before it is polled, so `paged` costs nothing while `streaming` works.
pub(crate) fn streaming_or_paged<K: Send + 'static>(
    streaming: WatchStream<K>,
    paged: WatchStream<K>,
) -> WatchStream<K> {
    Fallback {
        state: State::Trying { streaming, paged },
    }
    .boxed()
}

enum State<K> {
    /// Streaming, no event yet: a refusal still switches to `paged`.
    Trying {
        streaming: WatchStream<K>,
        paged: WatchStream<K>,
    },
    /// Streaming works: it stays.
    Streaming(WatchStream<K>),
    /// The server refused streaming lists: paged lists from now on.
    Paged(WatchStream<K>),
    /// Between states (never observed outside `poll_next`).
    Switching,
}

struct Fallback<K> {
    state: State<K>,
}

impl<K> Stream for Fallback<K> {
    type Item = Result<watcher::Event<K>, watcher::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // Every field is a boxed stream (Unpin), so the state can be moved out and back.
        let this = self.get_mut();
        match &mut this.state {
            State::Streaming(stream) | State::Paged(stream) => stream.poll_next_unpin(cx),
            State::Switching => Poll::Ready(None),
            State::Trying { streaming, .. } => {
                let item = match streaming.poll_next_unpin(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(item) => item,
                };
                let State::Trying { streaming, paged } =
                    std::mem::replace(&mut this.state, State::Switching)
                else {
                    return Poll::Ready(None);
                };
                this.state = match &item {
                    Some(Err(error)) if refuses_streaming_list(error) => {
                        tracing::warn!(
                            %error,
                            "the API server refuses streaming lists (no WatchList): falling back to paged lists"
                        );
                        State::Paged(paged)
                    }
                    Some(Err(_)) => State::Trying { streaming, paged },
                    Some(Ok(_)) | None => State::Streaming(streaming),
                };
                Poll::Ready(item)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::Status;

    fn refusal(code: u16) -> watcher::Error {
        watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(Status {
            code,
            message: "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled".into(),
            ..Status::default()
        })))
    }

    fn events(
        items: Vec<Result<watcher::Event<ConfigMap>, watcher::Error>>,
    ) -> WatchStream<ConfigMap> {
        futures::stream::iter(items).boxed()
    }

    fn describe(item: &Result<watcher::Event<ConfigMap>, watcher::Error>) -> String {
        match item {
            Ok(watcher::Event::Init) => "init".into(),
            Ok(watcher::Event::InitDone) => "init-done".into(),
            Ok(other) => format!("{other:?}").chars().take(12).collect(),
            Err(error) => format!("error {}", refuses_streaming_list(error)),
        }
    }

    async fn run(stream: WatchStream<ConfigMap>) -> Vec<String> {
        stream.map(|item| describe(&item)).collect().await
    }

    #[tokio::test]
    async fn a_refused_streaming_list_falls_back_to_paged_lists_once() {
        for code in [400, 422] {
            let streaming = events(vec![Err(refusal(code)), Ok(watcher::Event::Init)]);
            let paged = events(vec![Ok(watcher::Event::Init), Ok(watcher::Event::InitDone)]);
            // The refusal is passed on, then only the paged stream is read.
            assert_eq!(
                run(streaming_or_paged(streaming, paged)).await,
                ["error true", "init", "init-done"],
                "code {code}"
            );
        }
    }

    #[tokio::test]
    async fn other_errors_are_retried_by_the_streaming_watch() {
        let streaming = events(vec![
            Err(refusal(503)),
            Err(refusal(403)),
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitDone),
        ]);
        let paged = events(vec![Ok(watcher::Event::Init)]);
        assert_eq!(
            run(streaming_or_paged(streaming, paged)).await,
            ["error false", "error false", "init", "init-done"]
        );
    }

    #[tokio::test]
    async fn once_streaming_has_started_a_later_refusal_does_not_switch() {
        let streaming = events(vec![
            Ok(watcher::Event::Init),
            Err(refusal(400)),
            Ok(watcher::Event::InitDone),
        ]);
        let paged = events(vec![Ok(watcher::Event::Init)]);
        assert_eq!(
            run(streaming_or_paged(streaming, paged)).await,
            ["init", "error true", "init-done"]
        );
    }
}
