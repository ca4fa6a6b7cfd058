//! Exchanges as data: a scripted request and what to compare in the answer.

use serde_json::Value;

/// A scripted HTTP request. `path`, query values, header values and the body may hold
/// placeholders: `{ns}` (the area's namespace) and `{var}` for a value an earlier exchange
/// captured ([`Exchange::capture`]).
#[derive(Debug, Clone)]
pub struct Request {
    /// HTTP method (`GET`, `POST`, `PUT`, `PATCH`, `DELETE`).
    pub method: String,
    /// Path, e.g. `/api/v1/namespaces/{ns}/configmaps`.
    pub path: String,
    /// Query parameters, in order (values are percent-encoded when sent).
    pub query: Vec<(String, String)>,
    /// Extra headers (`Content-Type` defaults to `application/json` when a body is given).
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    pub body: Option<Body>,
}

/// A request body.
#[derive(Debug, Clone)]
pub enum Body {
    /// A JSON value, sent serialised.
    Json(Value),
    /// Raw text, sent as is.
    Text(String),
    /// A JSON object of a built-in kind, sent as the protobuf body Go clients send
    /// (`application/vnd.kubernetes.protobuf`, encoded by kcr-envtest's message tables).
    Protobuf(Value),
}

/// What of an answer is compared.
#[derive(Debug, Clone)]
pub enum What {
    /// The status code only.
    Code,
    /// The status code and, for a `Status` body, its reason, details, causes and message.
    Status,
    /// The status code and the whole body after normalisation.
    Body,
    /// The status code and the values at these paths (see [`crate::normalise::pick`]).
    Pick(Vec<String>),
    /// A watch: the status code and the ordered events (type and normalised object). Periodic
    /// bookmarks are dropped (their timing is not part of the contract); the
    /// `k8s.io/initial-events-end` bookmark is kept.
    Watch,
}

/// One scripted request and what to compare of its answers.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// Stable name (`area/what`), used by the known-differences list.
    pub name: String,
    /// The request.
    pub request: Request,
    /// What to compare.
    pub what: What,
    /// Values to remember from the answer body, per backend: `(variable, path)`.
    pub captures: Vec<(String, String)>,
    /// Requests made while a watch is open (after its answer headers arrived); their answers
    /// are not compared.
    pub during: Vec<Request>,
}

/// One step of an area's script.
#[derive(Debug, Clone)]
pub enum Step {
    /// An exchange, run against both backends and compared.
    Exchange(Exchange),
    /// A request whose answer is not compared (setup).
    Setup(Request),
    /// Poll a request on each backend until it answers `code` (bounded: at most `seconds`),
    /// for effects that are asynchronous on the real backend (garbage collection, CRD
    /// establishment, namespace deletion). Not compared; a timeout is reported as a
    /// difference of the next exchange's area.
    WaitFor {
        /// The request polled.
        request: Request,
        /// The status code waited for.
        code: u16,
        /// Bound on the wait.
        seconds: u64,
    },
}

/// A group of steps run in order in a fresh namespace.
#[derive(Debug, Clone)]
pub struct Area {
    /// Area name (the exchange name prefix).
    pub name: String,
    /// The namespace the area creates first and uses as `{ns}`.
    pub namespace: String,
    /// The script.
    pub steps: Vec<Step>,
}

impl Request {
    /// A request with no query, headers or body.
    pub fn new(method: &str, path: &str) -> Request {
        Request {
            method: method.to_string(),
            path: path.to_string(),
            query: Vec::new(),
            headers: Vec::new(),
            body: None,
        }
    }

    /// Add a query parameter.
    pub fn q(mut self, k: &str, v: &str) -> Request {
        self.query.push((k.to_string(), v.to_string()));
        self
    }

    /// Add a header.
    pub fn h(mut self, k: &str, v: &str) -> Request {
        self.headers.push((k.to_string(), v.to_string()));
        self
    }

    /// Set a JSON body.
    pub fn json(mut self, v: Value) -> Request {
        self.body = Some(Body::Json(v));
        self
    }

    /// Set a raw text body.
    pub fn text(mut self, t: &str) -> Request {
        self.body = Some(Body::Text(t.to_string()));
        self
    }

    /// Whether this is a watch request.
    pub fn is_watch(&self) -> bool {
        self.query
            .iter()
            .any(|(k, v)| k == "watch" && (v == "true" || v == "1"))
    }
}

/// `GET path`.
pub fn get(path: &str) -> Request {
    Request::new("GET", path)
}

/// `POST path` with a JSON body.
pub fn post(path: &str, body: Value) -> Request {
    Request::new("POST", path).json(body)
}

/// `PUT path` with a JSON body.
pub fn put(path: &str, body: Value) -> Request {
    Request::new("PUT", path).json(body)
}

/// `DELETE path`.
pub fn delete(path: &str) -> Request {
    Request::new("DELETE", path)
}

/// `PATCH path` with a body of the given patch content type (`json`, `merge`, `strategic`,
/// `apply`).
pub fn patch(path: &str, kind: &str, body: Value) -> Request {
    let ct = match kind {
        "json" => "application/json-patch+json",
        "merge" => "application/merge-patch+json",
        "strategic" => "application/strategic-merge-patch+json",
        "apply" => "application/apply-patch+yaml",
        other => other,
    };
    Request::new("PATCH", path).h("Content-Type", ct).json(body)
}

/// A script being written for one area.
#[derive(Debug)]
pub struct Script {
    area: String,
    steps: Vec<Step>,
}

impl Script {
    /// An empty script for `area`.
    pub fn new(area: &str) -> Script {
        Script {
            area: area.to_string(),
            steps: Vec::new(),
        }
    }

    /// Add an exchange named `area/name`, comparing `what`.
    pub fn ex(&mut self, name: &str, request: Request, what: What) -> &mut Exchange {
        self.steps.push(Step::Exchange(Exchange {
            name: format!("{}/{name}", self.area),
            request,
            what,
            captures: Vec::new(),
            during: Vec::new(),
        }));
        match self.steps.last_mut() {
            Some(Step::Exchange(e)) => e,
            _ => unreachable!("an exchange was just pushed"),
        }
    }

    /// Add an exchange comparing the whole body.
    pub fn body(&mut self, name: &str, request: Request) -> &mut Exchange {
        self.ex(name, request, What::Body)
    }

    /// Add an exchange comparing the status code and any Status body.
    pub fn status(&mut self, name: &str, request: Request) -> &mut Exchange {
        self.ex(name, request, What::Status)
    }

    /// Add an exchange comparing the values at `paths`.
    pub fn pick(&mut self, name: &str, request: Request, paths: &[&str]) -> &mut Exchange {
        self.ex(
            name,
            request,
            What::Pick(paths.iter().map(|p| p.to_string()).collect()),
        )
    }

    /// Add a watch exchange; `during` run while it is open.
    pub fn watch(&mut self, name: &str, request: Request, during: Vec<Request>) -> &mut Exchange {
        let e = self.ex(name, request, What::Watch);
        e.during = during;
        e
    }

    /// Add an uncompared setup request.
    pub fn setup(&mut self, request: Request) {
        self.steps.push(Step::Setup(request));
    }

    /// Wait until `request` answers `code` on both backends (at most `seconds`).
    pub fn wait_for(&mut self, request: Request, code: u16, seconds: u64) {
        self.steps.push(Step::WaitFor {
            request,
            code,
            seconds,
        });
    }

    /// The finished area, run in namespace `conf-<area>`.
    pub fn done(self) -> Area {
        Area {
            namespace: format!("conf-{}", self.area.replace('_', "-")),
            name: self.area,
            steps: self.steps,
        }
    }
}

impl Exchange {
    /// Remember the value at `path` of the answer body as `{var}` (per backend).
    pub fn capture(&mut self, var: &str, path: &str) -> &mut Exchange {
        self.captures.push((var.to_string(), path.to_string()));
        self
    }
}
