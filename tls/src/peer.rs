//! [`ClientCertificate`]: the certificate a client presented and the server verified (mutual
//! TLS), as handlers see it.
//!
//! kcr's servers put it into every request of the connection as a request extension
//! (`request.extensions().get::<ClientCertificate>()` in an axum or hyper handler; the raw
//! admission handlers of kcr-webhook get it in their context). The subject is read from the
//! certificate: its common name (a Kubernetes client certificate's user name), its
//! organizations (the user's groups) and the whole name in RFC 4514 form
//! (`CN=kube-apiserver,O=system:masters`, the last attribute of the certificate's name first,
//! as Go's `pkix.Name.String` writes it).

use rustls::pki_types::CertificateDer;

use crate::der;
pub use crate::der::NameAttribute;

/// A verified client certificate: see the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertificate {
    chain: Vec<CertificateDer<'static>>,
    /// Relative distinguished names in certificate order, each with its attributes.
    subject: Vec<Vec<NameAttribute>>,
}

impl ClientCertificate {
    /// The client certificate of a chain as a client sent it (end entity first); `None` for an
    /// empty chain or an end-entity certificate whose subject does not parse.
    pub fn from_chain(chain: Vec<CertificateDer<'static>>) -> Option<Self> {
        let subject = der::subject(chain.first()?.as_ref())?;
        Some(ClientCertificate { chain, subject })
    }

    /// The verified client certificate of a server connection, if the client sent one.
    pub fn from_connection(conn: &rustls::ServerConnection) -> Option<Self> {
        let chain = conn.peer_certificates()?;
        Self::from_chain(chain.iter().map(|c| c.clone().into_owned()).collect())
    }

    /// The chain the client sent: its certificate first, then any intermediates.
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    /// The client's certificate (DER).
    pub fn end_entity(&self) -> &CertificateDer<'static> {
        &self.chain[0]
    }

    /// Every attribute of the subject, in certificate order.
    pub fn subject_attributes(&self) -> impl Iterator<Item = &NameAttribute> {
        self.subject.iter().flatten()
    }

    /// The subject's common name (the first `CN`), if any.
    pub fn common_name(&self) -> Option<&str> {
        self.values("CN").next()
    }

    /// The subject's organizations (`O`), in order.
    pub fn organizations(&self) -> Vec<&str> {
        self.values("O").collect()
    }

    fn values<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.subject_attributes()
            .filter(move |a| a.kind == kind)
            .map(|a| a.value.as_str())
    }

    /// The subject in RFC 4514 form, e.g. `CN=kube-apiserver,O=system:masters`.
    pub fn subject(&self) -> String {
        self.subject
            .iter()
            .rev()
            .map(|rdn| {
                rdn.iter()
                    .map(|a| {
                        if a.hex {
                            format!("{}={}", a.kind, a.value)
                        } else {
                            format!("{}={}", a.kind, escape(&a.value))
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("+")
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// RFC 4514 escaping of an attribute value.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
