//! [`TestCluster`]: what the kit needs from the server a test runs against, implemented for a
//! [`TestApiServer`] of the test's own and for a [`TestNamespace`] on the test binary's shared
//! server.

use kcr_envtest::{TestApiServer, TestNamespace};

/// A server a test talks to, and the namespace the test works in.
pub trait TestCluster {
    /// A client for the server whose default namespace is [`namespace`](Self::namespace).
    fn client(&self) -> kube::Client;

    /// The namespace the test works in.
    fn namespace(&self) -> &str;

    /// Whether other tests share this server: then what the kit installs cluster-wide
    /// (webhook configurations) is restricted to [`namespace`](Self::namespace) and named
    /// uniquely.
    fn is_shared(&self) -> bool;
}

impl TestCluster for TestApiServer {
    fn client(&self) -> kube::Client {
        TestApiServer::client(self)
    }

    fn namespace(&self) -> &str {
        TestApiServer::namespace(self)
    }

    fn is_shared(&self) -> bool {
        self.shares_its_cluster()
    }
}

impl TestCluster for TestNamespace {
    fn client(&self) -> kube::Client {
        TestNamespace::client(self)
    }

    fn namespace(&self) -> &str {
        TestNamespace::namespace(self)
    }

    fn is_shared(&self) -> bool {
        true
    }
}

impl<T: TestCluster + ?Sized> TestCluster for &T {
    fn client(&self) -> kube::Client {
        (**self).client()
    }

    fn namespace(&self) -> &str {
        (**self).namespace()
    }

    fn is_shared(&self) -> bool {
        (**self).is_shared()
    }
}
