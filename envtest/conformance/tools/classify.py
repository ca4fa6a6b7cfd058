#!/usr/bin/env python3
"""Group the suite's differences by root cause.

Usage: KCR_CONFORMANCE_PATHS=1000 kcr-envtest-conformance --verbose > out.txt
       python3 tools/classify.py out.txt [--known]   (--known: print known_differences.txt lines)
       python3 tools/classify.py out.txt --markdown  (DIFFERENCES.md)
       python3 tools/classify.py out.txt --doc-table (the rows of kcr-envtest's "Measured
                                                      differences" section, checked by
                                                      tests/fidelity_table.rs)

Each differing path of each DIFF/KNOWN line is matched against RULES (first match wins, on
"exchange-name path-text"); an exchange's causes are the set over its paths.
"""
import re
import sys
from collections import defaultdict

# (cause, regex on "name: piece"); the first that matches wins.
RULES = [
    # Name-based causes first: every differing path of these exchanges follows from one cause.
    ("KUBELET-SUBRESOURCES", r"^discovery/aggregated/v1/(pods|nodes|services): .*subresources"),
    ("BOOTSTRAP-OBJECTS", r"^kinds/kubernetes-service"),
    ("NO-DEFAULT-SERVICEACCOUNT", r"^crud/serviceaccount/list: //items:"),
    ("POD-GRACEFUL-DELETE", r"^crud/pod/delete: /metadata/(deletion|generation)"),
    ("GC-ORPHAN-FINALIZER", r"^deletion/gc-orphan/delete-owner"),
    ("OBJECT-VALIDATION", r"^(errors/(422-bad-label|422-bad-data-key|422-deployment-selector|400-strict-unknown-field)|kinds/(lease-bad-duration|mutating-webhook-invalid|validating-webhook-invalid|events-v1-missing-fields)|status/widget-status-put|crd_schema/crd-invalid): "),
    ("REQUEST-VALIDATION", r"^(resource_version/(get-future|get-garbage|list-match-without-rv|list-match-bad|update-garbage-rv)|deletion/(dry-run-bad-value|bad-propagation)|errors/400-bad-field-validation|apply/force-on-non-apply|watch/(send-initial-events-without-bookmarks|bad-timeout)): "),
    ("PATCH-ERROR-CODES", r"^(patch/(json-bad-op|strategic-bad-directive)|apply/(apply-wrong-name|apply-no-kind)): (code|/code|/reason|/details: )"),
    ("CONTENT-TYPE-415", r"^errors/415-content-type: (code|/code|/reason)"),
    ("PARTIAL-METADATA-WRITES", r"^kinds/partial-(patch|put|create): /(apiVersion|kind|data): "),
    ("CONTINUE-TOKEN-FORMAT", r"^pagination/continue-expired: (?!/\(shape\)/firstKey)"),
    ("NOOP-UPDATE-BUMPS-RV", r"^resource_version/update-noop"),
    ("SELECTOR-DEFAULTED-FIELDS", r"^selectors/(node-unschedulable-false|pod-phase|pod-restart)"),
    ("CR-TABLE-COLUMNS", r"^crd_schema/table"),
    ("FINALIZER-UPDATE-ANSWER", r"^deletion/remove-finalizer: /metadata/finalizers"),
    ("WATCH-LEAVING-OBJECT", r"^watch/leaves-selector: events/\d+/object/metadata/labels"),
    ("DRY-RUN-CREATE", r"^(deletion/dry-run-create|apply/dry-run-apply): /metadata/(uid|creationTimestamp)"),
    ("APPLY-YAML-1.1", r"^apply/apply-yaml-text: (/data|.*f:data/f:true)"),
    ("LIMIT-WITH-RV0", r"^pagination/limit-rv0"),
    ("DELETE-ANSWER", r"^(crd_schema/cr-delete|crud/(?!pod/|namespace/|serviceaccount/|service/|pvc/)[a-z]+/delete|deletion/(gc-[a-z]+/delete-owner|dry-run-delete|precondition-uid-match)|kinds/(runtimeclass|node|mutating-webhook|validating-webhook)-delete): (?!/\(shape\)/firstKey|/metadata/managedFields)"),
    # Path-based causes.
    ("JSON-FIELD-ORDER", r"\(shape\)/firstKey"),
    ("STATUS-BODY-SHAPE", r"\(shape\)/(trailingNewline|metadata|emptyGroupInDetails)|/(reason|details/(group|name)): real=\(absent\) envtest=\"\""),
    ("EMPTY-MAP-KEPT", r"/data: real=\(absent\) envtest=\{\}|f:data: real=\(absent\) envtest=\{\}"),
    ("MANAGED-FIELDS-SET", r"managedFields"),
    ("LIST-ITEM-KIND", r"items/\d+/(kind|apiVersion): real=\(absent\)"),
    ("DISCOVERY-DETAILS", r"^discovery/"),
    ("BUILTIN-DEFAULTS", r"(imagePullPolicy|terminationMessage|/resources: real=\{\}|progressDeadlineSeconds|revisionHistoryLimit|spec/type: real=\"ClusterIP\"|spec/conversion|deprecated(First|Last)Timestamp|deprecatedSource|eventTime: real=null|(first|last)Timestamp: real=null|/status: real=\{\}|/status: real=\{\"phase\":\"Pending\"|status/(phase|qosClass)|status: real=\{\"loadBalancer|spec/(clusterIPs?|internalTrafficPolicy|ipFamilies|ipFamilyPolicy|sessionAffinity|dnsPolicy|enableServiceLinks|preemptionPolicy|priority|restartPolicy|schedulerName|securityContext|terminationGracePeriodSeconds|tolerations|strategy)|ports/\d+/(protocol|targetPort)|webhooks/0/(failurePolicy|matchPolicy|namespaceSelector|objectSelector|reinvocationPolicy|rules/0/scope|timeoutSeconds)|reportingComponent|reportingInstance|/source: real=\{\})"),
    ("REMAINING-ITEM-COUNT", r"remainingItemCount"),
    ("NOT-FOUND-DETAILS", r"N page not found"),
    ("STATUS-TEXT-AND-DETAILS", r"(/message: |causes/\d+/message|/details/causes: |/details: real=\{\} envtest=\(absent\)|/details/(kind|name|group): )"),
]

REASONS = {
    "KUBELET-SUBRESOURCES": "the subresources that need a kubelet or a proxy (pods/attach, exec, log, portforward, proxy, resize; nodes/proxy; services/proxy) are neither served nor listed in discovery (stays: no kubelet runs)",
    "BOOTSTRAP-OBJECTS": "objects the real server creates at start are missing (the kubernetes Service in default, bootstrap RBAC such as cluster-admin)",
    "NO-DEFAULT-SERVICEACCOUNT": "the real control plane's serviceaccount controller creates `default` in every namespace; kcr-envtest does not",
    "POD-GRACEFUL-DELETE": "pods are removed at once; the real server answers the pod with deletionTimestamp, deletionGracePeriodSeconds 0 and generation bumped",
    "MANAGED-FIELDS-SET": "stays with APPLY-YAML-1.1 (the field set of a YAML 1.2 parse)",
    "GC-ORPHAN-FINALIZER": "orphan propagation: the real server answers the owner carrying the `orphan` finalizer (the garbage collector removes it); kcr-envtest orphans inside the request",
    "OBJECT-VALIDATION": "per-type validation the real server does and kcr-envtest does not: fieldValidation=Strict on built-ins (no schemas of the built-in types), a CRD's storage version and storedVersions",
    "REQUEST-VALIDATION": "query parameter validation (resourceVersion on get: future -> 504, garbage -> 500; resourceVersionMatch without resourceVersion or unknown -> 422; dryRun, propagationPolicy, fieldValidation values -> 422; force on non-apply patch -> 422; watch: sendInitialEvents without bookmarks and a bad timeoutSeconds are accepted)",
    "PATCH-ERROR-CODES": "status code/reason for bad patches (invalid JSON patch op: real 422 Invalid; unknown $patch directive: real 500; apply with another name or no kind: real 400 BadRequest)",
    "CONTENT-TYPE-415": "a POST with an unsupported Content-Type answers 400 instead of 415 UnsupportedMediaType",
    "PARTIAL-METADATA-WRITES": "Accept as=PartialObjectMetadata is ignored on write responses (create, update, patch)",
    "CONTINUE-TOKEN-FORMAT": "continue tokens are server-internal: the real server accepted a hand-made etcd-style token for an uncompacted revision, kcr-envtest rejects it (stays: tokens are opaque; an expired token of each server's own is a 410 on both)",
    "NOOP-UPDATE-BUMPS-RV": "an update that changes nothing gets a new resourceVersion; the real server keeps the old one (no write)",
    "SELECTOR-DEFAULTED-FIELDS": "field selectors on fields that default when absent (spec.unschedulable=false; pods' status.phase and spec.restartPolicy, which the real server defaults)",
    "CR-TABLE-COLUMNS": "custom resource Table output adds an Age column and writes <none> for missing cells; real: only the declared columns (plus Name), null cells, the longer Name description",
    "FINALIZER-UPDATE-ANSWER": "the update removing the last finalizer of a deleted object answers the last stored state (finalizers kept); the real server answers the object without them",
    "WATCH-LEAVING-OBJECT": "an object leaving a watch's label selector: the DELETED event carries the new state; the real server sends the previous (still matching) state",
    "DRY-RUN-CREATE": "a dry-run create does not fill uid and creationTimestamp",
    "APPLY-YAML-1.1": "apply YAML is read as YAML 1.2; the real server's YAML 1.1 turns keys like y/yes/on into booleans (stays unless kcr wants 1.1 quirks)",
    "LIMIT-WITH-RV0": "list with limit and resourceVersion=0: the real server serves its watch cache and ignores limit",
    "DELETE-ANSWER": "a DELETE that removes the object at once answers the deleted object; the real server answers Status Success with details (name, group, kind, uid) for all kinds but pods; a foreground/orphan delete answers the object with its finalizer",
    "JSON-FIELD-ORDER": "kcr-envtest writes JSON keys alphabetically (apiVersion first); the real server writes kind, apiVersion, metadata, then the type's field order",
    "STATUS-BODY-SHAPE": "Status bodies: no trailing newline, no `metadata: {}`, an empty `details.group`, `details.name` or `reason` written",
    "EMPTY-MAP-KEPT": "an empty map (`data: {}`) is stored and written back; the real server drops it (omitempty)",
    "MANAGED-FIELDS-SET": "managedFields field sets that follow another difference: the field set of the YAML 1.1 apply names its keys as parsed (see APPLY-YAML-1.1)",
    "LIST-ITEM-KIND": "list items carry kind/apiVersion; the real server omits them",
    "DISCOVERY-DETAILS": "discovery details (storageVersionHash, categories, verbs, aggregated responseKind) differ",
    "BUILTIN-DEFAULTS": "built-in defaulting not done (Pod spec and containers, Service spec and clusterIP allocation, Deployment spec/strategy, webhook fields, CRD spec.conversion, Event null/empty fields; status filled on create: Pod phase/qosClass, Service loadBalancer, Deployment {})",
    "REMAINING-ITEM-COUNT": "remainingItemCount is not set on paginated lists",
    "NOT-FOUND-DETAILS": "a 404 for an unserved path or subresource carries causes `UnexpectedServerResponse: 404 page not found` and no details (group, kind, name)",
    "STATUS-TEXT-AND-DETAILS": "Status message texts and details differ (the watch ListOptions Invalid names group meta.k8s.io, prefixes `Forbidden: ` and adds an Unsupported value cause)",
}

# Where in envtest/src the fix belongs (file: function), per cause.
FIXES = {
    "KUBELET-SUBRESOURCES": "stays; or resources/kinds.rs subresources and api/computed.rs, answering as upstream does without a kubelet (`pod ... does not have a host assigned`)",
    "BOOTSTRAP-OBJECTS": "server.rs TestApiServerBuilder::start / store.rs Store::new, where the default namespaces are seeded",
    "NO-DEFAULT-SERVICEACCOUNT": "api.rs create (namespaces) or store.rs create: add `default` ServiceAccount; or list as staying (a controller's work)",
    "POD-GRACEFUL-DELETE": "store.rs Store::delete (pods: answer with deletionTimestamp, grace 0, generation+1)",
    "MANAGED-FIELDS-SET": "stays with APPLY-YAML-1.1 (the field set of a YAML 1.2 parse)",
    "GC-ORPHAN-FINALIZER": "store.rs Store::delete (orphan propagation: answer the owner with the `orphan` finalizer); or list as staying (synchronous GC)",
    "OBJECT-VALIDATION": "api/decode.rs check_type (Strict decoding of built-ins needs their schemas; likely stays); CRD validation (storage version)",
    "REQUEST-VALIDATION": "api/options.rs",
    "PATCH-ERROR-CODES": "patch_glue.rs patch_error / apply_error",
    "CONTENT-TYPE-415": "api.rs parse_body / create (415 for an unsupported Content-Type)",
    "PARTIAL-METADATA-WRITES": "api.rs written (honour the Accept output mode as render does)",
    "CONTINUE-TOKEN-FORMAT": "stays (tokens are opaque); or drop the exchange",
    "NOOP-UPDATE-BUMPS-RV": "store.rs Store::update (no write, same resourceVersion, no event when nothing changed)",
    "SELECTOR-DEFAULTED-FIELDS": "selector.rs selectable_field (a node's spec.unschedulable is false when absent; pods' fields follow their defaults)",
    "CR-TABLE-COLUMNS": "table.rs custom_columns / table (no Age when columns are declared, null cells)",
    "FINALIZER-UPDATE-ANSWER": "store.rs Store::update (the finalize path answers the object as written)",
    "WATCH-LEAVING-OBJECT": "watch.rs start (selector transition: DELETED carries the previous object at the new resourceVersion)",
    "DRY-RUN-CREATE": "api.rs create / dry_run_response (fill uid and creationTimestamp)",
    "APPLY-YAML-1.1": "patch/apply.rs parse_apply_body; likely stays",
    "LIMIT-WITH-RV0": "api.rs list (resourceVersion=0 without Match ignores limit)",
    "DELETE-ANSWER": "api.rs delete (Status Success with details when the object is gone at once)",
    "JSON-FIELD-ORDER": "store.rs (pre-serialised bytes of StoredObject) and api.rs json_value / render / render_list: write kind, apiVersion, metadata first",
    "STATUS-BODY-SHAPE": "error.rs ApiError::to_status (metadata: {}, no empty group, name or reason) and api.rs error_response (trailing newline)",
    "EMPTY-MAP-KEPT": "defaults.rs apply (drop empty omitempty maps of built-ins, e.g. data)",
    "MANAGED-FIELDS-SET": "none of its own: it goes with APPLY-YAML-1.1 (Service and container ports are keyed by port and protocol since this cause's fix in patch/strategy.rs, `Row::MapKeys`)",
    "LIST-ITEM-KIND": "api.rs render_list (items without kind/apiVersion)",
    "DISCOVERY-DETAILS": "discovery.rs resource_entries (storageVersionHash, categories, verbs) and aggregated_resource (responseKind group/version)",
    "BUILTIN-DEFAULTS": "defaults.rs admit_create / apply (Pod, containers, Service incl. clusterIP, Deployment, webhooks, Events, CRD conversion, status on create)",
    "REMAINING-ITEM-COUNT": "api.rs list",
    "NOT-FOUND-DETAILS": "error.rs no_route and api.rs route (a missing resource or subresource in a served group: NotFound without causes)",
    "STATUS-TEXT-AND-DETAILS": "api/watch.rs start (ListOptions causes)",
}

# Why a difference remains (for the crate docs' fidelity table): "stays: ..." where kcr-envtest
# means to differ, "open: ..." where the fix is known and not done yet.
STAYS = {
    "KUBELET-SUBRESOURCES": "stays: no kubelet or proxy runs in process",
    "CONTINUE-TOKEN-FORMAT": "stays: continue tokens are opaque and server-internal (an expired token is a 410 on both)",
    "APPLY-YAML-1.1": "stays: YAML 1.2 is read (kcr does not reproduce YAML 1.1's booleans)",
    "OBJECT-VALIDATION": "strict decoding of built-ins stays (it needs their full schemas); the CRD storage-version check is open",
    "MANAGED-FIELDS-SET": "stays with APPLY-YAML-1.1 (the field set of a YAML 1.2 parse)",
    "GC-ORPHAN-FINALIZER": "stays: garbage collection runs inside the request (deterministic tests)",
}

def why(cause):
    return STAYS.get(cause, "open: fix known, not done yet; see DIFFERENCES.md for where")

def pieces(detail):
    return [p for p in re.split(r"; (?=(?:code:|/|events/|transport:))", detail) if p]

def main():
    path = sys.argv[1]
    known = "--known" in sys.argv
    by_cause = defaultdict(list)
    out = []
    for line in open(path):
        m = re.match(r"^(DIFF|KNOWN|CHANGED) (\S+?)(?: \[([^\]]*)\])?: (.*)$", line.rstrip("\n"))
        if not m:
            continue
        name, detail = m.group(2), m.group(4)
        fp = re.findall(r"\b[0-9a-f]{8}\b", m.group(3) or "")
        fp = fp[0] if fp else "*"
        causes = []
        for p in pieces(detail):
            subject = f"{name}: {p}"
            cause = next((c for c, rx in RULES if re.search(rx, subject)), "UNCLASSIFIED")
            if cause not in causes:
                causes.append(cause)
        # One exchange, one primary cause first: specific ones before the pervasive shape ones.
        order = [c for c, _ in RULES] + ["UNCLASSIFIED"]
        causes.sort(key=order.index)
        for c in causes:
            by_cause[c].append((name, detail))
        out.append((name, causes, fp, detail))
    counts = defaultdict(int)
    for _, causes, _, _ in out:
        for c in causes:
            counts[c] += 1
    if "--markdown" in sys.argv:
        print("# Differences found by the conformance suite, by root cause\n")
        print("Generated by `tools/classify.py --markdown` from a verbose run. For each cause: what")
        print("differs, where the fix belongs, the exchanges it appears in, and one example line.\n")
        for c in sorted(counts, key=lambda c: -counts[c]):
            items = by_cause[c]
            print(f"## {c} ({len(items)} exchanges)\n")
            print(f"- Differs: {REASONS.get(c, '?')}")
            print(f"- Fix: {FIXES.get(c, '?')}")
            names = ", ".join(n for n, _ in items)
            print(f"- Exchanges: {names}")
            ex = next((p for n, d in items for p in pieces(d) if re.search(dict(RULES).get(c, '^$'), f'{n}: {p}')), items[0][1])
            print(f"- Example ({items[0][0]}): `{ex[:300]}`\n")
        return
    if "--doc-table" in sys.argv:
        print("//! | root cause | exchanges | what differs | why it remains |")
        print("//! |---|---|---|---|")
        for c in sorted(counts, key=lambda c: (-counts[c], c)):
            print(f"//! | `{c}` | {counts[c]} | {REASONS.get(c, '?')} | {why(c)} |")
        return
    if known:
        for name, causes, fp, detail in out:
            reason = REASONS.get(causes[0], "see the suite's line")
            print(f"{name} | {'+'.join(causes)} | {fp} | {reason}")
        return
    for c, items in sorted(by_cause.items(), key=lambda kv: -len(kv[1])):
        print(f"== {c} ({len(items)})")
        for name, detail in items[:400]:
            print(f"  {name}: {detail[:300]}")

main()
