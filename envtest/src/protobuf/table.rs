//! The shape of the protobuf message tables: a message's JSON shape and fields, each field's
//! number, JSON name, type and rule, and the constructors the generated tables
//! (`generated.rs`) are written with. The decoder and encoder of the parent module read them.

/// A scalar type, or a message.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ty {
    /// `string`.
    Str,
    /// `int32` (a negative number is a sign-extended varint; the low 32 bits count).
    Int32,
    /// `int64`.
    Int64,
    /// `bool`.
    Bool,
    /// `bytes`, base64 in JSON.
    Bytes,
    /// A message.
    Msg(&'static Message),
}

/// How a message's JSON looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// An object of its fields.
    Object,
    /// A Go slice type (`ExtraValue`, `Verbs`): the array of its field 1.
    Items,
    /// `resource.Quantity`: its string (field 1).
    Quantity,
    /// `intstr.IntOrString`: `type` (1), `intVal` (2), `strVal` (3).
    IntOrString,
    /// `metav1.Time`: seconds (1), RFC 3339 in seconds.
    Time,
    /// `metav1.MicroTime`: seconds (1) and nanoseconds (2), RFC 3339 in microseconds.
    MicroTime,
    /// `metav1.FieldsV1`: its JSON bytes (field 1).
    RawJson,
    /// `runtime.RawExtension`: its JSON bytes (field 1), or a protobuf object.
    RawExtension,
}

/// How a field of a message becomes JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rule {
    /// Kept at any value: a non-pointer without `omitempty` (Go always writes it).
    Keep,
    /// A pointer: present or not, kept at any value when present.
    Opt,
    /// Left out at its zero value: a non-pointer tagged `omitempty`.
    Omit,
    /// `repeated`: an array.
    Repeated,
    /// `map<string, _>`: an object.
    Map,
    /// An embedded struct without a JSON name: its fields go into the parent.
    Inline,
}

/// One field of a message: its number, JSON name, type and rule.
#[derive(Debug)]
pub(super) struct Spec {
    pub(super) number: u64,
    pub(super) name: &'static str,
    pub(super) ty: Ty,
    pub(super) rule: Rule,
}

/// A message type: its Go name (for errors), its JSON shape and its fields.
#[derive(Debug)]
pub(super) struct Message {
    pub(super) name: &'static str,
    pub(super) shape: Shape,
    pub(super) fields: &'static [Spec],
}

pub(super) const fn keep(number: u64, name: &'static str, ty: Ty) -> Spec {
    Spec {
        number,
        name,
        ty,
        rule: Rule::Keep,
    }
}

pub(super) const fn opt(number: u64, name: &'static str, ty: Ty) -> Spec {
    Spec {
        rule: Rule::Opt,
        ..keep(number, name, ty)
    }
}

pub(super) const fn omit(number: u64, name: &'static str, ty: Ty) -> Spec {
    Spec {
        rule: Rule::Omit,
        ..keep(number, name, ty)
    }
}

pub(super) const fn rep(number: u64, name: &'static str, ty: Ty) -> Spec {
    Spec {
        rule: Rule::Repeated,
        ..keep(number, name, ty)
    }
}

pub(super) const fn map(number: u64, name: &'static str, ty: Ty) -> Spec {
    Spec {
        rule: Rule::Map,
        ..keep(number, name, ty)
    }
}

pub(super) const fn inline(number: u64, name: &'static str, ty: Ty) -> Spec {
    Spec {
        rule: Rule::Inline,
        ..keep(number, name, ty)
    }
}
