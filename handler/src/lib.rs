//! # kcr-handler: from events to reconcile requests
//!
//! An [`EventHandler`] receives an [`Event`](kcr_core::Event) and adds zero or more
//! [`Request`]s (namespace + name) to a [`kcr_queue::WorkQueue`]. The built-ins cover
//! controller-runtime's handlers:
//!
//! * [`EnqueueRequestForObject`]: the object itself (a controller's primary type);
//! * [`EnqueueRequestForOwner`]: its owners of a chosen type (controller owner by default, every
//!   owner optionally; matched on group and kind, ignoring the version);
//! * [`EnqueueRequestsFromMapFunc`]: whatever a function of the object returns;
//! * [`Funcs`]: one closure per event kind; any `Fn(&Event<K>, &WorkQueue<Request>)` closure is a
//!   handler too.
//!
//! Create events found by a source's list (`initial: true`: its initial list, or a relist after a
//! `410 Gone`) are added with [`kcr_queue::LOW_PRIORITY`] (see [`priority_of`]), so that changes
//! made while a controller starts or recovers overtake the list, as in controller-runtime's
//! priority queue. Updates of the same object are de-duplicated by the
//! queue; handlers that map one event to several requests add each request once.
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
//! use kcr_handler::{EnqueueRequestForOwner, EventHandler, Request};
//! use kcr_queue::WorkQueue;
//! use kcr_core::Event;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let queue = WorkQueue::<Request>::new("deployments");
//! let mut rs = ReplicaSet::default();
//! rs.metadata.name = Some("web-5d8f".into());
//! rs.metadata.namespace = Some("prod".into());
//! rs.metadata.owner_references = Some(vec![OwnerReference {
//!     api_version: "apps/v1".into(),
//!     kind: "Deployment".into(),
//!     name: "web".into(),
//!     controller: Some(true),
//!     ..Default::default()
//! }]);
//!
//! EnqueueRequestForOwner::<Deployment>::new().handle(&Event::create(rs), &queue);
//! let item = queue.get().await.unwrap();
//! assert_eq!(*item, Request::namespaced("web", "prod"));
//! # }
//! ```
#![forbid(unsafe_code)]

mod funcs;
mod handler;
mod map;
mod object;
mod owner;

pub use funcs::Funcs;
pub use handler::{EventHandler, enqueue_all, priority_of};
pub use kcr_core::Request;
pub use map::EnqueueRequestsFromMapFunc;
pub use object::EnqueueRequestForObject;
pub use owner::EnqueueRequestForOwner;
