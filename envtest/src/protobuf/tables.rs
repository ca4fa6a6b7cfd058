//! Data table: the protobuf message types of the built-in kinds decoded here (field number,
//! JSON name, type), the subset of `k8s.io/api`'s `generated.proto` that kubectl's `create`
//! generators fill in, and the top-level kinds.

use super::Ty::{Bool, BytesMap, Int, IntOrString, Msg, QuantityMap, Str, StrMap};
use super::{Message, f, opt, rep};

static OWNER_REFERENCE: Message = Message {
    name: "OwnerReference",
    fields: &[
        f(1, "kind", Str),
        f(3, "name", Str),
        f(4, "uid", Str),
        f(5, "apiVersion", Str),
        opt(6, "controller", Bool),
        opt(7, "blockOwnerDeletion", Bool),
    ],
};

static OBJECT_META: Message = Message {
    name: "ObjectMeta",
    fields: &[
        f(1, "name", Str),
        f(2, "generateName", Str),
        f(3, "namespace", Str),
        f(5, "uid", Str),
        f(6, "resourceVersion", Str),
        f(7, "generation", Int),
        f(11, "labels", StrMap),
        f(12, "annotations", StrMap),
        rep(13, "ownerReferences", Msg(&OWNER_REFERENCE)),
        rep(14, "finalizers", Str),
    ],
};

static LABEL_SELECTOR_REQUIREMENT: Message = Message {
    name: "LabelSelectorRequirement",
    fields: &[
        f(1, "key", Str),
        f(2, "operator", Str),
        rep(3, "values", Str),
    ],
};

static LABEL_SELECTOR: Message = Message {
    name: "LabelSelector",
    fields: &[
        f(1, "matchLabels", StrMap),
        rep(2, "matchExpressions", Msg(&LABEL_SELECTOR_REQUIREMENT)),
    ],
};

static CONTAINER_PORT: Message = Message {
    name: "ContainerPort",
    fields: &[
        f(1, "name", Str),
        f(2, "hostPort", Int),
        f(3, "containerPort", Int),
        f(4, "protocol", Str),
        f(5, "hostIP", Str),
    ],
};

static ENV_VAR: Message = Message {
    name: "EnvVar",
    fields: &[f(1, "name", Str), f(2, "value", Str)],
};

static RESOURCE_REQUIREMENTS: Message = Message {
    name: "ResourceRequirements",
    fields: &[f(1, "limits", QuantityMap), f(2, "requests", QuantityMap)],
};

static CONTAINER: Message = Message {
    name: "Container",
    fields: &[
        f(1, "name", Str),
        f(2, "image", Str),
        rep(3, "command", Str),
        rep(4, "args", Str),
        f(5, "workingDir", Str),
        rep(6, "ports", Msg(&CONTAINER_PORT)),
        rep(7, "env", Msg(&ENV_VAR)),
        f(8, "resources", Msg(&RESOURCE_REQUIREMENTS)),
        f(13, "terminationMessagePath", Str),
        f(14, "imagePullPolicy", Str),
        f(16, "stdin", Bool),
        f(17, "stdinOnce", Bool),
        f(18, "tty", Bool),
        f(20, "terminationMessagePolicy", Str),
    ],
};

static POD_SPEC: Message = Message {
    name: "PodSpec",
    fields: &[
        rep(2, "containers", Msg(&CONTAINER)),
        f(3, "restartPolicy", Str),
        opt(4, "terminationGracePeriodSeconds", Int),
        opt(5, "activeDeadlineSeconds", Int),
        f(6, "dnsPolicy", Str),
        f(7, "nodeSelector", StrMap),
        f(8, "serviceAccountName", Str),
        f(9, "serviceAccount", Str),
        f(10, "nodeName", Str),
        f(11, "hostNetwork", Bool),
        f(12, "hostPID", Bool),
        f(13, "hostIPC", Bool),
        f(16, "hostname", Str),
        f(17, "subdomain", Str),
        f(19, "schedulerName", Str),
        rep(20, "initContainers", Msg(&CONTAINER)),
        f(24, "priorityClassName", Str),
    ],
};

static POD_TEMPLATE_SPEC: Message = Message {
    name: "PodTemplateSpec",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&POD_SPEC)),
    ],
};

static NAMESPACE_SPEC: Message = Message {
    name: "NamespaceSpec",
    fields: &[rep(1, "finalizers", Str)],
};

static NAMESPACE_STATUS: Message = Message {
    name: "NamespaceStatus",
    fields: &[f(1, "phase", Str)],
};

static NAMESPACE: Message = Message {
    name: "Namespace",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&NAMESPACE_SPEC)),
        f(3, "status", Msg(&NAMESPACE_STATUS)),
    ],
};

static CONFIG_MAP: Message = Message {
    name: "ConfigMap",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "data", StrMap),
        f(3, "binaryData", BytesMap),
        opt(4, "immutable", Bool),
    ],
};

static SECRET: Message = Message {
    name: "Secret",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "data", BytesMap),
        f(3, "type", Str),
        f(4, "stringData", StrMap),
        opt(5, "immutable", Bool),
    ],
};

static SERVICE_ACCOUNT: Message = Message {
    name: "ServiceAccount",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        opt(4, "automountServiceAccountToken", Bool),
    ],
};

static ROLLING_UPDATE_DEPLOYMENT: Message = Message {
    name: "RollingUpdateDeployment",
    fields: &[
        f(1, "maxUnavailable", IntOrString),
        f(2, "maxSurge", IntOrString),
    ],
};

static DEPLOYMENT_STRATEGY: Message = Message {
    name: "DeploymentStrategy",
    fields: &[
        f(1, "type", Str),
        f(2, "rollingUpdate", Msg(&ROLLING_UPDATE_DEPLOYMENT)),
    ],
};

static DEPLOYMENT_SPEC: Message = Message {
    name: "DeploymentSpec",
    fields: &[
        opt(1, "replicas", Int),
        f(2, "selector", Msg(&LABEL_SELECTOR)),
        f(3, "template", Msg(&POD_TEMPLATE_SPEC)),
        f(4, "strategy", Msg(&DEPLOYMENT_STRATEGY)),
        f(5, "minReadySeconds", Int),
        opt(6, "revisionHistoryLimit", Int),
        f(7, "paused", Bool),
        opt(9, "progressDeadlineSeconds", Int),
    ],
};

static DEPLOYMENT_STATUS: Message = Message {
    name: "DeploymentStatus",
    fields: &[
        f(1, "observedGeneration", Int),
        f(2, "replicas", Int),
        f(3, "updatedReplicas", Int),
        f(4, "availableReplicas", Int),
        f(5, "unavailableReplicas", Int),
        f(7, "readyReplicas", Int),
    ],
};

static DEPLOYMENT: Message = Message {
    name: "Deployment",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&DEPLOYMENT_SPEC)),
        f(3, "status", Msg(&DEPLOYMENT_STATUS)),
    ],
};

static JOB_SPEC: Message = Message {
    name: "JobSpec",
    fields: &[
        opt(1, "parallelism", Int),
        opt(2, "completions", Int),
        opt(3, "activeDeadlineSeconds", Int),
        f(4, "selector", Msg(&LABEL_SELECTOR)),
        opt(5, "manualSelector", Bool),
        f(6, "template", Msg(&POD_TEMPLATE_SPEC)),
        opt(7, "backoffLimit", Int),
        opt(8, "ttlSecondsAfterFinished", Int),
        opt(9, "completionMode", Str),
        opt(10, "suspend", Bool),
    ],
};

static JOB_STATUS: Message = Message {
    name: "JobStatus",
    fields: &[
        f(4, "active", Int),
        f(5, "succeeded", Int),
        f(6, "failed", Int),
        f(7, "completedIndexes", Str),
        opt(9, "ready", Int),
    ],
};

static JOB: Message = Message {
    name: "Job",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&JOB_SPEC)),
        f(3, "status", Msg(&JOB_STATUS)),
    ],
};

static JOB_TEMPLATE_SPEC: Message = Message {
    name: "JobTemplateSpec",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&JOB_SPEC)),
    ],
};

static CRON_JOB_SPEC: Message = Message {
    name: "CronJobSpec",
    fields: &[
        f(1, "schedule", Str),
        opt(2, "startingDeadlineSeconds", Int),
        f(3, "concurrencyPolicy", Str),
        opt(4, "suspend", Bool),
        f(5, "jobTemplate", Msg(&JOB_TEMPLATE_SPEC)),
        opt(6, "successfulJobsHistoryLimit", Int),
        opt(7, "failedJobsHistoryLimit", Int),
        opt(8, "timeZone", Str),
    ],
};

static CRON_JOB_STATUS: Message = Message {
    name: "CronJobStatus",
    fields: &[],
};

static CRON_JOB: Message = Message {
    name: "CronJob",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&CRON_JOB_SPEC)),
        f(3, "status", Msg(&CRON_JOB_STATUS)),
    ],
};

static SERVICE_PORT: Message = Message {
    name: "ServicePort",
    fields: &[
        f(1, "name", Str),
        f(2, "protocol", Str),
        f(3, "port", Int),
        f(4, "targetPort", IntOrString),
        f(5, "nodePort", Int),
    ],
};

static SERVICE_SPEC: Message = Message {
    name: "ServiceSpec",
    fields: &[
        rep(1, "ports", Msg(&SERVICE_PORT)),
        f(2, "selector", StrMap),
        f(3, "clusterIP", Str),
        f(4, "type", Str),
        rep(5, "externalIPs", Str),
        f(7, "sessionAffinity", Str),
        f(8, "loadBalancerIP", Str),
        rep(9, "loadBalancerSourceRanges", Str),
        f(10, "externalName", Str),
        f(11, "externalTrafficPolicy", Str),
        f(12, "healthCheckNodePort", Int),
        f(13, "publishNotReadyAddresses", Bool),
    ],
};

static LOAD_BALANCER_STATUS: Message = Message {
    name: "LoadBalancerStatus",
    fields: &[],
};

static SERVICE_STATUS: Message = Message {
    name: "ServiceStatus",
    fields: &[f(1, "loadBalancer", Msg(&LOAD_BALANCER_STATUS))],
};

static SERVICE: Message = Message {
    name: "Service",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&SERVICE_SPEC)),
        f(3, "status", Msg(&SERVICE_STATUS)),
    ],
};

/// The top-level kinds whose protobuf bodies are decoded.
pub(super) const KINDS: &[(&str, &str, &Message)] = &[
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "Secret", &SECRET),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
    ("v1", "Service", &SERVICE),
    ("apps/v1", "Deployment", &DEPLOYMENT),
    ("batch/v1", "Job", &JOB),
    ("batch/v1", "CronJob", &CRON_JOB),
];
