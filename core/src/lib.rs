//! # kcr-core: the types the kcr crates share
//!
//! Three things pass between kcr's crates, and this crate holds exactly those, so that a crate
//! that needs only them (kcr-predicate, kcr-handler, your own filters and mappers) does not pull
//! in the kube client, hyper or rustls:
//!
//! * [`Event`] (and [`EventKind`]): what a source emits: an object was created (found by a list
//!   or seen as a watch event), updated (old and new), deleted (observed, or inferred after a
//!   relist), or a generic trigger. Objects are shared as `Arc<K>`.
//! * [`Request`]: what a controller reconciles: an object's name and, for namespaced objects, its
//!   namespace. Constructors take the name first, then the namespace.
//! * [`parse_label_selector`]: label selector strings (`app=web,tier in (a,b),!legacy`) parsed
//!   into kube-core's `Selector`, keys and values checked with kcr-names (the API server's rules
//!   and messages); a bad selector is a [`SelectorError`], never a panic.
//! * [`PerKind`]: one optional closure per event kind, what the `Funcs` of kcr-predicate and
//!   kcr-handler hold.
//!
//! The dependencies are kube-core, k8s-openapi, kcr-names and thiserror. The `kube-runtime`
//! feature (off by default; kcr-controller turns it on) adds `From<ObjectRef<K>> for Request` for
//! kube-runtime's reflector references.
//!
//! The types are re-exported where they were first defined: `kcr_source::Event`,
//! `kcr_source::parse_label_selector`, `kcr_handler::Request`.
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcr_core::{Event, EventKind, Request, parse_label_selector};
//! use kube_core::SelectorExt;
//!
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! cm.metadata.namespace = Some("prod".into());
//! cm.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
//!
//! let event = Event::create(cm);
//! assert_eq!(event.kind(), EventKind::Create);
//!
//! // The request a handler would enqueue for it: name first, then namespace.
//! let request = Request::from_object(event.object().as_ref());
//! assert_eq!(request, Request::namespaced("settings", "prod"));
//! assert_eq!(request.to_string(), "prod/settings");
//!
//! let selector = parse_label_selector("app in (web, api), !legacy").unwrap();
//! let labels = event.object().metadata.labels.clone().unwrap_or_default();
//! assert!(selector.matches(&labels));
//! assert!(parse_label_selector("app=web-").is_err()); // not a valid label value
//! ```
#![forbid(unsafe_code)]

mod event;
mod per_kind;
mod request;
mod selector;

pub use event::{Event, EventKind};
pub use per_kind::PerKind;
pub use request::Request;
pub use selector::{SelectorError, parse_label_selector};
