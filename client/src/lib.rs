//! # kcr-client: one client for every kind
//!
//! controller-runtime gives a Go reconciler `r.Client`: `Get` and `List` of any kind from the
//! shared cache (its informer started on first use), and `Create`, `Update`, `Patch`, `Delete`
//! and `Status()` writes to the API server. [`Client`] is that, on kube-rs and kcr's shared
//! [`Cache`](kcr_source::Cache):
//!
//! - **Reads from the cache.** [`Client::get`] and [`Client::list`] read the cache's copy of any
//!   kind; the first read of a kind starts its watch (one watch per kind and scope, shared with
//!   every controller's `for_kind`/`owns` of it) and waits for it to sync, up to a timeout
//!   ([`ClientError::SyncTimeout`] names the watch's last error, such as a 404 for a kind the
//!   server does not serve). Lists narrow by namespace, label selector and index lookups
//!   ([`ListOptions`], [`Client::index_field`]). A read of a namespace outside the cache's scope
//!   is [`ClientError::Read`]; with [`ClientOptions::fail_on_missing_informer`] a read of a kind
//!   nothing watches fails instead of starting a watch. [`Client::api_reader`] reads from the
//!   API server, for reads that must be fresh.
//! - **Writes to the API server**, each a [`Write`] to await: create, update, patch (merge, JSON,
//!   strategic merge, server-side apply), delete, delete-collection, the status and any other
//!   subresource. The client's field owner is the field manager of every write unless the call
//!   names another; dry-run and field validation are per call ([`Write::dry_run`],
//!   [`Write::field_validation`]) or for every call of a wrapper ([`Client::dry_run_all`],
//!   [`Client::with_field_validation`], [`Client::with_field_owner`]), and
//!   [`Client::in_namespace`] scopes a client to one namespace.
//! - **Run-time kinds**: [`Client::dynamic`] gives the same calls for `DynamicObject`s.
//! - **Errors** are [`ClientError`]s naming the verb, kind and object; [`ClientError::is_not_found`],
//!   [`is_conflict`](ClientError::is_conflict), [`is_forbidden`](ClientError::is_forbidden) and
//!   friends classify the API server's answer.
//!
//! A [`Manager`](https://docs.rs/kcr-controller) makes one with its cache and field owner
//! (`mgr.client()`); outside a manager, make one from a `kube::Client` and a `Cache`:
//!
//! ```
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kcr_client::{Client, ClientOptions, ListOptions};
//! use kcr_source::Cache;
//! use kube::api::{ObjectMeta, Patch};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> anyhow::Result<()> {
//! # let test = kcr_envtest::TestNamespace::new("client-doc").await?;
//! # let (kube, ns) = (test.client(), test.namespace().to_string());
//! let client = Client::new(kube.clone(), Cache::new(kube), ClientOptions::default().field_owner("doc"))
//!     .in_namespace(&ns);
//! let settings = ConfigMap {
//!     metadata: ObjectMeta { name: Some("settings".into()), labels: Some([("app".to_string(), "web".to_string())].into()), ..Default::default() },
//!     ..Default::default()
//! };
//! client.create(&settings).await?;
//! client.patch::<ConfigMap, _>("settings", None, &Patch::Merge(serde_json::json!({"data": {"mode": "blue"}}))).await?;
//!
//! // The cache follows the writes: wait until it shows the patch.
//! loop {
//!     let cached = client.get::<ConfigMap>("settings", None).await?.expect("created above");
//!     if cached.data.is_some() { break; }
//!     tokio::time::sleep(Duration::from_millis(20)).await;
//! }
//! let web = client.list::<ConfigMap>(&ListOptions::new().labels("app=web")).await?;
//! assert_eq!(web.len(), 1);
//! # Ok(()) }
//! ```
//!
//! ## Modules
//!
//! - [`client`]: [`Client`], [`ClientOptions`], [`WriteOptions`] and the wrappers.
//! - [`read`]: cached reads, [`ListOptions`], indexes.
//! - [`api_reader`]: [`ApiReader`], uncached reads.
//! - [`write`](mod@write): [`Write`] and its operations; the write calls themselves are on [`Client`].
//! - [`dynamic`]: [`DynamicClient`], for `DynamicObject`s.
//! - [`error`]: [`ClientError`] and [`Verb`].
#![forbid(unsafe_code)]

pub mod api_reader;
pub mod client;
pub mod dynamic;
pub mod error;
pub mod read;
mod target;
pub mod write;

pub use api_reader::ApiReader;
pub use client::{
    Client, ClientOptions, DEFAULT_FIELD_OWNER, DEFAULT_SYNC_TIMEOUT, FieldValidation, WriteOptions,
};
pub use dynamic::DynamicClient;
pub use error::{ClientError, Verb};
pub use read::ListOptions;
pub use write::{Create, Delete, DeleteAllOf, Operation, PatchOp, Update, Write};
