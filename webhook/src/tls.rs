//! TLS for the webhook server: kcr-tls, re-exported (the same types, so the manager's secured
//! metrics endpoint shares the certificate reload).
//!
//! [`CertWatcher`] serves `tls.crt`/`tls.key` and reloads them when they change (a Secret
//! volume's `..data` swap included; a pair that does not load keeps the previous one serving);
//! [`CertificateAuthority`] issues serving certificates for tests and self-managed deployments.
//! See [kcr_tls] for the details.

pub use kcr_tls::*;
