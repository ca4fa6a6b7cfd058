//! `kcr-envtest`: an in-process Kubernetes API server over real HTTP on loopback.
//!
//! (Work in progress: the server modules land in the next commits.)

#![forbid(unsafe_code)]

pub mod admission;
pub mod patch;
pub mod schema;
pub mod selector;
