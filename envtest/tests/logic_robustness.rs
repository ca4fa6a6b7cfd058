//! Randomised robustness and round-trip properties of the pure envtest modules (selectors,
//! patches, server-side apply, schema validation): arbitrary input never panics, and the
//! encodings round-trip. Deterministic (fixed-seed xorshift), a few thousand cases.

use kcr_envtest::patch::fields::{FieldDiff, fields_v1_of_object};
use kcr_envtest::patch::{
    self, ApplyOptions, FieldSet, MergeStrategy, UpdateOptions, record_update, server_side_apply,
};
use kcr_envtest::schema;
use kcr_envtest::selector::{FieldSelector, LabelSelector};
use serde_json::{Map, Value, json};

struct Rng(u64);

impl Rng {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.next(items.len())]
    }
}

const KEYS: &[&str] = &[
    "metadata",
    "labels",
    "finalizers",
    "ownerReferences",
    "uid",
    "spec",
    "taints",
    "key",
    "effect",
    "value",
    "status",
    "conditions",
    "type",
    "name",
    "containers",
    "env",
    "$patch",
    "$retainKeys",
    "$deleteFromPrimitiveList/finalizers",
    "$setElementOrder/taints",
    "managedFields",
    "properties",
    "items",
    "required",
    "enum",
    "additionalProperties",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "pattern",
    "format",
    "minimum",
    "maxLength",
    "default",
    "nullable",
    "oneOf",
];

const STRINGS: &[&str] = &[
    "",
    "a",
    "b",
    "delete",
    "replace",
    "merge",
    "object",
    "array",
    "string",
    "integer",
    "map",
    "set",
    "atomic",
    "NoSchedule",
    "Ready",
    "^[a-",
    "date-time",
    "f:spec",
    "k:{\"name\":\"a\"}",
];

fn value(rng: &mut Rng, depth: usize) -> Value {
    let choice = if depth == 0 { rng.next(4) } else { rng.next(7) };
    match choice {
        0 => Value::Null,
        1 => json!(rng.next(2) == 0),
        2 => json!(rng.next(20) as i64 - 5),
        3 => json!(rng.pick(STRINGS)),
        4 | 5 => {
            let mut m = Map::new();
            for _ in 0..rng.next(4) {
                m.insert(rng.pick(KEYS).to_string(), value(rng, depth - 1));
            }
            Value::Object(m)
        }
        _ => Value::Array((0..rng.next(4)).map(|_| value(rng, depth - 1)).collect()),
    }
}

fn object(rng: &mut Rng, depth: usize) -> Value {
    let mut m = Map::new();
    for _ in 0..2 + rng.next(4) {
        m.insert(rng.pick(KEYS).to_string(), value(rng, depth));
    }
    Value::Object(m)
}

fn selector_string(rng: &mut Rng) -> String {
    const PARTS: &[&str] = &[
        "a",
        "b",
        "app",
        "x/y",
        "=",
        "==",
        "!=",
        "!",
        " in ",
        " notin ",
        "(",
        ")",
        ",",
        " ",
        "<",
        ">",
        "5",
        "-",
        "\\",
        "\\,",
        ".",
        "metadata.name",
    ];
    (0..rng.next(8)).map(|_| rng.pick(PARTS)).collect()
}

#[test]
fn arbitrary_input_never_panics() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let strategies = [
        MergeStrategy::builtin("v1", "Node").unwrap_or_default(),
        MergeStrategy::builtin("v1", "Pod").unwrap_or_default(),
        MergeStrategy::atomic(),
    ];
    for _ in 0..1500 {
        let target = if rng.next(4) == 0 {
            value(&mut rng, 4)
        } else {
            object(&mut rng, 3)
        };
        let p = if rng.next(4) == 0 {
            value(&mut rng, 4)
        } else {
            object(&mut rng, 3)
        };
        let strategy = &strategies[rng.next(strategies.len())];
        let _ = patch::strategic_merge_patch(&target, &p, strategy);
        let _ = patch::merge_patch(&target, &p);
        let _ = patch::json_patch(&target, &p);
        let mut applied = p.clone();
        if let Value::Object(m) = &mut applied {
            m.insert("apiVersion".into(), json!("v1"));
            m.insert("kind".into(), json!("Node"));
        }
        let opts = ApplyOptions {
            manager: "m",
            force: rng.next(2) == 0,
            now: "t",
            strategy,
            subresource: None,
        };
        if let Ok(once) = server_side_apply(Some(&target), &applied, &opts) {
            let _ = server_side_apply(
                Some(&once),
                &applied,
                &ApplyOptions {
                    manager: "n",
                    ..opts
                },
            );
        }
        let uo = UpdateOptions {
            manager: "u",
            now: "t",
            strategy,
            subresource: None,
        };
        let _ = record_update(Some(&target), &p, &uo);
        let _ = schema::validate(&p, &target);
        let _ = schema::check_structural(&p, "s");
        let mut pruned = target.clone();
        let _ = schema::prune(&p, &mut pruned);
        schema::apply_defaults(&p, &mut pruned);
        let _ = LabelSelector::from_metav1(&p);
        let text = selector_string(&mut rng);
        let _ = LabelSelector::parse(&text);
        let _ = FieldSelector::parse(&text);
    }
}

#[test]
fn field_sets_round_trip_through_fields_v1() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let strategy = MergeStrategy::builtin("v1", "Node").unwrap_or_default();
    let mut non_trivial = 0;
    for _ in 0..1500 {
        let obj = object(&mut rng, 4);
        let set = FieldSet::of_object(&obj, &strategy);
        if set.len() > 3 {
            non_trivial += 1;
        }
        let encoded = set.to_fields_v1();
        // A create's FieldsV1 (every node, maps with their "." marker) parses back to the
        // same set.
        let created = FieldDiff::created(&obj, &strategy).changed;
        assert_eq!(
            FieldSet::from_fields_v1(&fields_v1_of_object(&obj, &strategy)),
            created,
            "create encoding does not round-trip for {obj}"
        );
        assert_eq!(
            FieldSet::from_fields_v1(&encoded),
            set,
            "{obj} -> {encoded}"
        );
        // An object's own fields never conflict with themselves on re-apply.
        if let Value::Object(mut m) = obj.clone() {
            m.insert("apiVersion".into(), json!("v1"));
            m.insert("kind".into(), json!("Node"));
            let applied = Value::Object(m);
            let opts = ApplyOptions {
                manager: "m",
                force: false,
                now: "t",
                strategy: &strategy,
                subresource: None,
            };
            if let Ok(once) = server_side_apply(None, &applied, &opts) {
                let again = server_side_apply(Some(&once), &applied, &opts);
                assert!(again.is_ok(), "{applied}: {again:?}");
            }
        }
    }
    assert!(non_trivial > 100, "generator too shallow: {non_trivial}");
}

#[test]
fn parsed_label_selectors_round_trip_through_display() {
    let mut rng = Rng(0xDEAD_BEEF_CAFE_F00D);
    let mut parsed = 0;
    for _ in 0..20_000 {
        let text = selector_string(&mut rng);
        if let Ok(sel) = LabelSelector::parse(&text) {
            parsed += 1;
            let shown = sel.to_string();
            let again = LabelSelector::parse(&shown);
            assert_eq!(again.as_ref(), Ok(&sel), "{text:?} -> {shown:?}");
        }
    }
    assert!(parsed > 500, "too few valid selectors generated: {parsed}");
}
