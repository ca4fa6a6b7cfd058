// Command protobuf-fixtures writes the fixtures of kcr-envtest's protobuf decoder test
// (envtest/tests/fixtures/protobuf-go): for each object below, <name>.pb is the body client-go
// sends for it with protobuf encoding (apimachinery's protobuf serializer, the `k8s\0` envelope)
// and <name>.json the body it sends with JSON encoding (encoding/json). The Rust decoder must turn
// the first into the second.
//
// Test tooling only (Go is for the test control plane and its tools); it lives in the control
// plane's module for its pinned k8s.io/api and k8s.io/apimachinery. Run from tools/control-plane/v1.37
// (offline against the module cache the control plane build fills):
//
//	go run ./cmd/protobuf-fixtures ../../../envtest/tests/fixtures/protobuf-go
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func ptr[T any](v T) *T { return &v }

var (
	created = metav1.NewTime(time.Date(2026, 11, 30, 8, 15, 42, 0, time.UTC))
	later   = metav1.NewTime(time.Date(2026, 12, 1, 23, 59, 59, 0, time.UTC))
	micro   = metav1.NewMicroTime(time.Date(2026, 12, 2, 10, 11, 12, 345678000, time.UTC))
)

func readMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              name,
		Namespace:         namespace,
		UID:               types.UID("6a0b1c2d-0000-4000-8000-00000000000" + fmt.Sprint(len(name)%10)),
		ResourceVersion:   "4711",
		Generation:        3,
		CreationTimestamp: created,
		Labels:            map[string]string{"app": name},
		Annotations:       map[string]string{"note": "read, then updated"},
		Finalizers:        []string{"example.com/cleanup"},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion:         "example.com/v1",
			Kind:               "Owner",
			Name:               "owner",
			UID:                types.UID("11111111-2222-4333-8444-555555555555"),
			Controller:         ptr(true),
			BlockOwnerDeletion: ptr(false),
		}},
		ManagedFields: []metav1.ManagedFieldsEntry{{
			Manager:    "kube-controller-manager",
			Operation:  metav1.ManagedFieldsOperationUpdate,
			APIVersion: "apps/v1",
			Time:       &later,
			FieldsType: "FieldsV1",
			FieldsV1:   &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{".":{},"f:note":{}}}}`)},
		}, {
			Manager:     "kubectl",
			Operation:   metav1.ManagedFieldsOperationApply,
			APIVersion:  "apps/v1",
			Time:        &created,
			FieldsType:  "FieldsV1",
			FieldsV1:    &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:replicas":{}}}`)},
			Subresource: "status",
		}},
	}
}

func container() corev1.Container {
	return corev1.Container{
		Name:       "app",
		Image:      "registry.example/app:1.2",
		Command:    []string{"/app"},
		Args:       []string{"--port=8080", ""},
		WorkingDir: "/srv",
		Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
			{ContainerPort: 0, HostPort: 9090, HostIP: "127.0.0.1", Protocol: corev1.ProtocolUDP},
		},
		EnvFrom: []corev1.EnvFromSource{{Prefix: "CM_", ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Optional: ptr(true)}}},
		Env: []corev1.EnvVar{
			{Name: "EMPTY", Value: ""},
			{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token"}}},
			{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
				Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
		},
		Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.1"), corev1.ResourceMemory: resource.MustParse("1e8")},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "config", MountPath: "/etc/app", ReadOnly: true},
			{Name: "scratch", MountPath: "/tmp", SubPath: "t", MountPropagation: ptr(corev1.MountPropagationNone)},
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP,
				HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "1"}},
			}},
			InitialDelaySeconds: 5, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3,
			TerminationGracePeriodSeconds: ptr(int64(0)),
		},
		ReadinessProbe:           &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}},
		StartupProbe:             &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}},
		Lifecycle:                &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 2}}},
		TerminationMessagePath:   "/dev/termination-log",
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr(false),
			RunAsUser:                ptr(int64(0)),
			AllowPrivilegeEscalation: ptr(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

func podSpec() corev1.PodSpec {
	return corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox", Command: []string{"sh", "-c", "true"}}},
		Containers:     []corev1.Container{container()},
		Volumes: []corev1.Volume{
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "settings"},
				Items:                []corev1.KeyToPath{{Key: "a", Path: "a.conf", Mode: ptr(int32(0o400))}},
				DefaultMode:          ptr(int32(0o644)),
			}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("64Mi"))}}},
			{Name: "empty", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience: "vault", ExpirationSeconds: ptr(int64(3600)), Path: "token"}}},
			}}},
		},
		RestartPolicy:                 corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr(int64(30)),
		DNSPolicy:                     corev1.DNSClusterFirst,
		NodeSelector:                  map[string]string{"kubernetes.io/os": "linux"},
		ServiceAccountName:            "app",
		AutomountServiceAccountToken:  ptr(false),
		SecurityContext:               &corev1.PodSecurityContext{FSGroup: ptr(int64(2000)), RunAsGroup: ptr(int64(0))},
		ImagePullSecrets:              []corev1.LocalObjectReference{{Name: "pull"}},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}},
			}}},
		}},
		SchedulerName: "default-scheduler",
		Tolerations: []corev1.Toleration{
			{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
		},
		HostAliases:        []corev1.HostAlias{{IP: "10.0.0.1", Hostnames: []string{"db"}}},
		PriorityClassName:  "high",
		Priority:           ptr(int32(-5)),
		DNSConfig:          &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}}},
		EnableServiceLinks: ptr(true),
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		}},
		Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
	}
}

func objects() map[string]runtime.Object {
	deployMeta := readMeta("web", "default")
	return map[string]runtime.Object{
		"node": &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{"kubernetes.io/hostname": "worker-1"}},
			Spec: corev1.NodeSpec{
				PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}, ProviderID: "kind://worker-1",
				Unschedulable: true,
				Taints: []corev1.Taint{
					{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
					{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute, TimeAdded: &later},
				},
			},
			Status: corev1.NodeStatus{
				Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110"), "hugepages-2Mi": resource.MustParse("0")},
				Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("7Gi")},
				Phase:       corev1.NodeRunning,
				Conditions: []corev1.NodeCondition{{
					Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: later, LastTransitionTime: created,
					Reason: "KubeletReady", Message: "kubelet is posting ready status",
				}},
				Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.2"}, {Type: corev1.NodeHostName, Address: "worker-1"}},
				DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
				NodeInfo:        corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64"},
				Images:          []corev1.ContainerImage{{Names: []string{"registry.example/app:1.2"}, SizeBytes: 123456789012}},
			},
		},
		"pod": &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-0", GenerateName: "web-", Labels: map[string]string{"app": "web"}},
			Spec:       podSpec(),
		},
		"deployment_read": &appsv1.Deployment{
			ObjectMeta: deployMeta,
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr(int32(0)),
				Selector: &metav1.LabelSelector{
					MatchLabels:      map[string]string{"app": "web"},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}}},
				},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}},
				},
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr(intstr.FromInt32(0)), MaxSurge: ptr(intstr.FromString("25%")),
				}},
				RevisionHistoryLimit:    ptr(int32(10)),
				ProgressDeadlineSeconds: ptr(int32(600)),
			},
			Status: appsv1.DeploymentStatus{
				ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1, UnavailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{
					Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, LastUpdateTime: later, LastTransitionTime: created,
					Reason: "MinimumReplicasUnavailable", Message: "Deployment does not have minimum availability.",
				}},
			},
		},
		"delete_options": &metav1.DeleteOptions{
			TypeMeta:           metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DeleteOptions"},
			GracePeriodSeconds: ptr(int64(0)),
			Preconditions:      &metav1.Preconditions{UID: ptr(types.UID("6a0b1c2d-0000-4000-8000-000000000003")), ResourceVersion: ptr("4711")},
			PropagationPolicy:  ptr(metav1.DeletePropagationForeground),
			DryRun:             []string{metav1.DryRunAll},
		},
		"delete_options_empty": &metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "DeleteOptions"}},
		"lease": &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "manager-leader", Namespace: "kube-system"},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr("manager-7d9f_1c2e"),
				LeaseDurationSeconds: ptr(int32(15)),
				AcquireTime:          &micro,
				RenewTime:            ptr(metav1.NewMicroTime(time.Date(2026, 12, 2, 10, 11, 27, 0, time.UTC))),
				LeaseTransitions:     ptr(int32(0)),
			},
		},
		"secret_bytes": &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "default"},
			Immutable:  ptr(false),
			Data:       map[string][]byte{"token": []byte("s3cr3t"), "binary": {0, 0xff, 0xfe, 0x80, '\n'}, "empty": {}},
			Type:       corev1.SecretTypeOpaque,
		},
		"configmap_binary": &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default"},
			Data:       map[string]string{"a.conf": "x=1\n", "empty": ""},
			BinaryData: map[string][]byte{"blob": {1, 2, 3}},
		},
		"csr": &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "node-csr-1"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:           []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n"),
				SignerName:        "kubernetes.io/kube-apiserver-client",
				ExpirationSeconds: ptr(int32(86400)),
				Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
				Username:          "alice",
				Groups:            []string{"system:authenticated"},
				Extra:             map[string]certificatesv1.ExtraValue{"scopes": {"a", "b"}, "none": {}},
			},
		},
		"clusterrole": &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "clusterRole-10"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"", "apps"}, Resources: []string{"pods", "deployments/scale"}, Verbs: []string{"get", "list", "watch"}},
				{NonResourceURLs: []string{"/healthz"}, Verbs: []string{"get"}},
			},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"aggregate": "true"}}}},
		},
		"rolebinding": &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "read", Namespace: "default"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "app", Namespace: "default"}, {Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "devs"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		},
		"scale": &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "4711"},
			Spec:       autoscalingv1.ScaleSpec{Replicas: 0},
		},
		"token_request": &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{
				Audiences:         []string{"https://kubernetes.default.svc"},
				ExpirationSeconds: ptr(int64(600)),
				BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web-0", UID: "6a0b1c2d-0000-4000-8000-000000000005"},
			},
		},
		"subject_access_review": &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "default", Verb: "get", Resource: "pods"},
				User:               "alice",
				Extra:              map[string]authorizationv1.ExtraValue{"scopes": {"x"}},
			},
		},
		"event_events": &eventsv1.Event{
			ObjectMeta:               metav1.ObjectMeta{Name: "web.1", Namespace: "default"},
			EventTime:                micro,
			Series:                   &eventsv1.EventSeries{Count: 2, LastObservedTime: micro},
			ReportingController:      "example.com/operator",
			ReportingInstance:        "operator-0",
			Action:                   "Reconcile",
			Reason:                   "Synced",
			Regarding:                corev1.ObjectReference{Kind: "Deployment", Namespace: "default", Name: "web", APIVersion: "apps/v1"},
			Note:                     "synced",
			Type:                     corev1.EventTypeNormal,
			DeprecatedFirstTimestamp: created,
		},
		"event_core": &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "web.2", Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0", FieldPath: "spec.containers{app}"},
			Reason:         "Pulled",
			Message:        "image pulled",
			Source:         corev1.EventSource{Component: "kubelet", Host: "worker-1"},
			FirstTimestamp: created,
			LastTimestamp:  later,
			Count:          3,
			Type:           corev1.EventTypeNormal,
		},
		"service": &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: corev1.ServiceSpec{
				Ports: []corev1.ServicePort{
					{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP},
					{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(0), NodePort: 30090},
				},
				Selector:              map[string]string{"app": "web"},
				Type:                  corev1.ServiceTypeNodePort,
				IPFamilyPolicy:        ptr(corev1.IPFamilyPolicySingleStack),
				SessionAffinity:       corev1.ServiceAffinityClientIP,
				SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(10800))}},
			},
		},
		"statefulset": &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
			Spec: appsv1.StatefulSetSpec{
				Replicas:    ptr(int32(3)),
				Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
				ServiceName: "db",
				Template:    corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "postgres"}}}},
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
					ObjectMeta: metav1.ObjectMeta{Name: "data"},
					Spec: corev1.PersistentVolumeClaimSpec{
						AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
						StorageClassName: ptr(""),
					},
				}},
				PodManagementPolicy:                  appsv1.ParallelPodManagement,
				UpdateStrategy:                       appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(int32(0)), MaxUnavailable: ptr(intstr.FromString("50%"))}},
				PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType},
			},
		},
		"controller_revision": &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Name: "db-7b9c", Namespace: "default"},
			Data:       runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"metadata":{"labels":{"app":"db"}}}}}`)},
			Revision:   2,
		},
		"hpa": &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web", APIVersion: "apps/v1"},
				MinReplicas:    ptr(int32(1)),
				MaxReplicas:    10,
				Metrics: []autoscalingv2.MetricSpec{{
					Type: autoscalingv2.ResourceMetricSourceType,
					Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory, Target: autoscalingv2.MetricTarget{
						Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr(resource.MustParse("500Mi"))}},
				}},
			},
		},
		"network_policy": &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "deny", Namespace: "default"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromInt32(8000)), EndPort: ptr(int32(9000))}},
					From:  []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}},
				}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			},
		},
		"pdb": &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: ptr(intstr.FromString("50%")),
				Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			},
		},
		// The end-to-end test's bodies (tests/protobuf_bodies.rs): no namespace (the URL gives
		// it), names of their own, nothing that needs another object to exist.
		"e2e_lease": &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "pb-leader"},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr("manager-7d9f_1c2e"),
				LeaseDurationSeconds: ptr(int32(15)),
				AcquireTime:          &micro,
				RenewTime:            &micro,
				LeaseTransitions:     ptr(int32(0)),
			},
		},
		"e2e_secret": &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "pb-secret"},
			Data:       map[string][]byte{"binary": {0, 0xff, 0xfe, 0x80, '\n'}, "token": []byte("s3cr3t")},
			Type:       corev1.SecretTypeOpaque,
		},
		"e2e_deployment": e2eDeployment(ptr(int32(0)), "v1", nil, nil),
		"e2e_deployment_update": e2eDeployment(ptr(int32(2)), "v2", &created, []metav1.ManagedFieldsEntry{{
			Manager: "protobuf-client", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", Time: &later,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:version":{}}}}`)},
		}}),
		"e2e_delete_conflict": &metav1.DeleteOptions{
			TypeMeta:      metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DeleteOptions"},
			Preconditions: &metav1.Preconditions{ResourceVersion: ptr("1")},
		},
		"e2e_delete": &metav1.DeleteOptions{
			TypeMeta:           metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DeleteOptions"},
			GracePeriodSeconds: ptr(int64(0)),
			PropagationPolicy:  ptr(metav1.DeletePropagationBackground),
		},
		"e2e_node": &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "kcr-protobuf-e2e-node", Labels: map[string]string{"kcr.example/protobuf": "true"}},
			Spec: corev1.NodeSpec{
				PodCIDR: "10.244.9.0/24", PodCIDRs: []string{"10.244.9.0/24"}, ProviderID: "kcr://protobuf",
				Unschedulable: true,
				Taints:        []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &later}},
			},
			Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
		},
		"e2e_pod": e2ePod(),
		"e2e_eviction": &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: "pb-pod"},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))},
		},
		"e2e_scale": &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: "pb-web"},
			Spec:       autoscalingv1.ScaleSpec{Replicas: 3},
		},
		"e2e_token_request": &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"pb-audience"}, ExpirationSeconds: ptr(int64(3600))},
		},
		"e2e_csr": &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "kcr-protobuf-e2e-csr"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:           csrPEM(),
				SignerName:        "example.com/protobuf",
				ExpirationSeconds: ptr(int32(86400)),
				Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			},
		},
		"e2e_clusterrole": &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "kcr-protobuf-e2e-role"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"", "apps"}, Resources: []string{"pods", "deployments/scale"}, Verbs: []string{"get", "list", "watch"}},
				{NonResourceURLs: []string{"/healthz"}, Verbs: []string{"get"}},
			},
		},
		"e2e_event": &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: "kcr-protobuf-e2e-event"},
			EventTime:           micro,
			ReportingController: "example.com/operator",
			ReportingInstance:   "operator-0",
			Action:              "Reconcile",
			Reason:              "Synced",
			Regarding:           corev1.ObjectReference{Kind: "Deployment", Name: "pb-web", APIVersion: "apps/v1"},
			Note:                "synced",
			Type:                corev1.EventTypeNormal,
		},
		"eviction": &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: "web-0", Namespace: "default"},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(5))},
		},
	}
}

// e2eDeployment: the end-to-end test's Deployment, as created (replicas 0) and as updated after
// reading it (creationTimestamp and managedFields as read, new replicas and label).
func e2eDeployment(replicas *int32, version string, created *metav1.Time, managed []metav1.ManagedFieldsEntry) *appsv1.Deployment {
	meta := metav1.ObjectMeta{Name: "pb-web", Labels: map[string]string{"app": "pb-web", "version": version}, ManagedFields: managed}
	if created != nil {
		meta.CreationTimestamp = *created
		meta.Generation = 1
	}
	c := container()
	c.Ports = c.Ports[:1]
	c.Lifecycle = nil
	c.LivenessProbe.TerminationGracePeriodSeconds = ptr(int64(10))
	c.Env = c.Env[:2]
	c.EnvFrom = nil
	c.SecurityContext.RunAsNonRoot = ptr(true)
	c.SecurityContext.RunAsUser = ptr(int64(1000))
	return &appsv1.Deployment{
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pb-web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "pb-web"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{c},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, DefaultMode: ptr(int32(0o644))}}},
						{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr(resource.MustParse("64Mi"))}}},
					},
					TerminationGracePeriodSeconds: ptr(int64(0)),
				},
			},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr(intstr.FromInt32(0)), MaxSurge: ptr(intstr.FromString("25%")),
			}},
		},
	}
}

// e2ePod: a Pod with the parts of a spec operators fill in: probes, resources, volumes, env.
func e2ePod() *corev1.Pod {
	spec := e2eDeployment(nil, "v1", nil, nil).Spec.Template.Spec
	spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pb-pod", Labels: map[string]string{"app": "pb-pod"}}, Spec: spec}
}

// csrPEM: a PEM certificate request from a fixed ed25519 key (ed25519 signatures are
// deterministic, so the fixture is the same on every run).
func csrPEM() []byte {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	der, err := x509.CreateCertificateRequest(nil, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "protobuf-client", Organization: []string{"kcr"}}}, key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// kinds: the group version of each object (what a typed client's versioning codec sets).
var kinds = map[string]schema.GroupVersionKind{
	"node":                  corev1.SchemeGroupVersion.WithKind("Node"),
	"pod":                   corev1.SchemeGroupVersion.WithKind("Pod"),
	"deployment_read":       appsv1.SchemeGroupVersion.WithKind("Deployment"),
	"lease":                 coordinationv1.SchemeGroupVersion.WithKind("Lease"),
	"secret_bytes":          corev1.SchemeGroupVersion.WithKind("Secret"),
	"configmap_binary":      corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	"csr":                   certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest"),
	"clusterrole":           rbacv1.SchemeGroupVersion.WithKind("ClusterRole"),
	"rolebinding":           rbacv1.SchemeGroupVersion.WithKind("RoleBinding"),
	"scale":                 autoscalingv1.SchemeGroupVersion.WithKind("Scale"),
	"token_request":         authenticationv1.SchemeGroupVersion.WithKind("TokenRequest"),
	"subject_access_review": authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview"),
	"event_events":          eventsv1.SchemeGroupVersion.WithKind("Event"),
	"event_core":            corev1.SchemeGroupVersion.WithKind("Event"),
	"service":               corev1.SchemeGroupVersion.WithKind("Service"),
	"statefulset":           appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
	"controller_revision":   appsv1.SchemeGroupVersion.WithKind("ControllerRevision"),
	"hpa":                   autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler"),
	"network_policy":        networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"),
	"pdb":                   policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"),
	"eviction":              policyv1.SchemeGroupVersion.WithKind("Eviction"),
	"e2e_lease":             coordinationv1.SchemeGroupVersion.WithKind("Lease"),
	"e2e_secret":            corev1.SchemeGroupVersion.WithKind("Secret"),
	"e2e_deployment":        appsv1.SchemeGroupVersion.WithKind("Deployment"),
	"e2e_deployment_update": appsv1.SchemeGroupVersion.WithKind("Deployment"),
	"e2e_node":              corev1.SchemeGroupVersion.WithKind("Node"),
	"e2e_pod":               corev1.SchemeGroupVersion.WithKind("Pod"),
	"e2e_eviction":          policyv1.SchemeGroupVersion.WithKind("Eviction"),
	"e2e_scale":             autoscalingv1.SchemeGroupVersion.WithKind("Scale"),
	"e2e_token_request":     authenticationv1.SchemeGroupVersion.WithKind("TokenRequest"),
	"e2e_csr":               certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest"),
	"e2e_clusterrole":       rbacv1.SchemeGroupVersion.WithKind("ClusterRole"),
	"e2e_event":             eventsv1.SchemeGroupVersion.WithKind("Event"),
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: protobuf-fixtures OUTPUT_DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pb := protobuf.NewSerializer(nil, nil)
	for name, obj := range objects() {
		if gvk, ok := kinds[name]; ok {
			obj.GetObjectKind().SetGroupVersionKind(gvk)
		}
		var body bytes.Buffer
		if err := pb.EncodeWithAllocator(obj, &body, &runtime.SimpleAllocator{}); err != nil {
			fmt.Fprintf(os.Stderr, "%s: protobuf: %v\n", name, err)
			os.Exit(1)
		}
		js, err := json.MarshalIndent(obj, "", "  ")
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: json: %v\n", name, err)
			os.Exit(1)
		}
		for file, data := range map[string][]byte{name + ".pb": body.Bytes(), name + ".json": append(js, '\n')} {
			if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
	}
}
