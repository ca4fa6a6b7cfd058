//! What the manager shows of itself: the `/healthz`, `/readyz` and `/metrics` endpoints
//! ([`http`]), every metric it exports ([`metrics`], [`rest_client`], [`process`]) and the
//! secured metrics endpoint ([`secure_metrics`]).

pub mod http;
pub mod metrics;
pub mod process;
pub mod rest_client;
pub mod secure_metrics;
