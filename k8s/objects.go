package k8s

// The Kubernetes objects infermatrix k8s prints, as the small subset of
// the API's fields it sets. They are written here rather than imported
// from k8s.io/api so that the binary does not carry the API's generated
// code (tens of megabytes) for a few manifests; the tests decode every
// manifest strictly into k8s.io/api's own types, so a field spelled or
// placed wrongly here fails them.

// Meta is an object's metadata.
type Meta struct {
	Name        string            `yaml:"name,omitempty"`
	Namespace   string            `yaml:"namespace,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// Object is one manifest: apiVersion, kind, metadata and the kind's body.
type Object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   Meta   `yaml:"metadata"`
	// Exactly one of the following is set, by Kind.
	Data       map[string]string `yaml:"data,omitempty"`       // ConfigMap
	BinaryData map[string]string `yaml:"binaryData,omitempty"` // ConfigMap, base64
	Spec       any               `yaml:"spec,omitempty"`       // Job, PVC, Deployment, Service
	// Comment is printed above the object: why it is there and how to
	// use it. Not part of the object.
	Comment string `yaml:"-"`
}

// JobSpec is batch/v1 JobSpec.
type JobSpec struct {
	CompletionMode          string            `yaml:"completionMode,omitempty"`
	Completions             *int32            `yaml:"completions,omitempty"`
	Parallelism             *int32            `yaml:"parallelism,omitempty"`
	BackoffLimit            *int32            `yaml:"backoffLimit,omitempty"`
	BackoffLimitPerIndex    *int32            `yaml:"backoffLimitPerIndex,omitempty"`
	ActiveDeadlineSeconds   *int64            `yaml:"activeDeadlineSeconds,omitempty"`
	TTLSecondsAfterFinished *int32            `yaml:"ttlSecondsAfterFinished,omitempty"`
	PodFailurePolicy        *PodFailurePolicy `yaml:"podFailurePolicy,omitempty"`
	Template                PodTemplate       `yaml:"template"`
}

// PodFailurePolicy is batch/v1 PodFailurePolicy.
type PodFailurePolicy struct {
	Rules []PodFailureRule `yaml:"rules"`
}

// PodFailureRule is one rule: an action for a container's exit codes or
// for a pod condition.
type PodFailureRule struct {
	Action          string           `yaml:"action"`
	OnExitCodes     *OnExitCodes     `yaml:"onExitCodes,omitempty"`
	OnPodConditions []OnPodCondition `yaml:"onPodConditions,omitempty"`
}

// OnExitCodes matches a container's exit codes.
type OnExitCodes struct {
	ContainerName string  `yaml:"containerName,omitempty"`
	Operator      string  `yaml:"operator"`
	Values        []int32 `yaml:"values,flow"`
}

// OnPodCondition matches a pod condition.
type OnPodCondition struct {
	Type   string `yaml:"type"`
	Status string `yaml:"status"`
}

// PodTemplate is core/v1 PodTemplateSpec.
type PodTemplate struct {
	Metadata Meta    `yaml:"metadata"`
	Spec     PodSpec `yaml:"spec"`
}

// PodSpec is core/v1 PodSpec.
type PodSpec struct {
	RestartPolicy                 string                     `yaml:"restartPolicy,omitempty"`
	TerminationGracePeriodSeconds *int64                     `yaml:"terminationGracePeriodSeconds,omitempty"`
	SecurityContext               *PodSecurityContext        `yaml:"securityContext,omitempty"`
	TopologySpreadConstraints     []TopologySpreadConstraint `yaml:"topologySpreadConstraints,omitempty"`
	Containers                    []Container                `yaml:"containers"`
	Volumes                       []Volume                   `yaml:"volumes,omitempty"`
}

// PodSecurityContext is core/v1 PodSecurityContext.
type PodSecurityContext struct {
	RunAsNonRoot   *bool           `yaml:"runAsNonRoot,omitempty"`
	RunAsUser      *int64          `yaml:"runAsUser,omitempty"`
	RunAsGroup     *int64          `yaml:"runAsGroup,omitempty"`
	FSGroup        *int64          `yaml:"fsGroup,omitempty"`
	SeccompProfile *SeccompProfile `yaml:"seccompProfile,omitempty"`
}

// SeccompProfile is core/v1 SeccompProfile.
type SeccompProfile struct {
	Type string `yaml:"type"`
}

// TopologySpreadConstraint is core/v1 TopologySpreadConstraint.
type TopologySpreadConstraint struct {
	MaxSkew           int32         `yaml:"maxSkew"`
	TopologyKey       string        `yaml:"topologyKey"`
	WhenUnsatisfiable string        `yaml:"whenUnsatisfiable"`
	LabelSelector     LabelSelector `yaml:"labelSelector"`
}

// LabelSelector is meta/v1 LabelSelector (match labels only).
type LabelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

// Container is core/v1 Container.
type Container struct {
	Name                     string                    `yaml:"name"`
	Image                    string                    `yaml:"image"`
	ImagePullPolicy          string                    `yaml:"imagePullPolicy,omitempty"`
	Args                     []string                  `yaml:"args"`
	Env                      []EnvVar                  `yaml:"env,omitempty"`
	Ports                    []ContainerPort           `yaml:"ports,omitempty"`
	Resources                *Resources                `yaml:"resources,omitempty"`
	VolumeMounts             []VolumeMount             `yaml:"volumeMounts,omitempty"`
	TerminationMessagePath   string                    `yaml:"terminationMessagePath,omitempty"`
	TerminationMessagePolicy string                    `yaml:"terminationMessagePolicy,omitempty"`
	ReadinessProbe           *Probe                    `yaml:"readinessProbe,omitempty"`
	SecurityContext          *ContainerSecurityContext `yaml:"securityContext,omitempty"`
}

// EnvVar is core/v1 EnvVar.
type EnvVar struct {
	Name      string        `yaml:"name"`
	Value     string        `yaml:"value,omitempty"`
	ValueFrom *EnvVarSource `yaml:"valueFrom,omitempty"`
}

// EnvVarSource is core/v1 EnvVarSource (a Secret's key only).
type EnvVarSource struct {
	SecretKeyRef *SecretKeySelector `yaml:"secretKeyRef,omitempty"`
}

// SecretKeySelector is core/v1 SecretKeySelector.
type SecretKeySelector struct {
	Name     string `yaml:"name"`
	Key      string `yaml:"key"`
	Optional *bool  `yaml:"optional,omitempty"`
}

// ContainerPort is core/v1 ContainerPort.
type ContainerPort struct {
	Name          string `yaml:"name"`
	ContainerPort int32  `yaml:"containerPort"`
	Protocol      string `yaml:"protocol,omitempty"`
}

// Resources is core/v1 ResourceRequirements.
type Resources struct {
	Requests map[string]string `yaml:"requests,omitempty"`
	Limits   map[string]string `yaml:"limits,omitempty"`
}

// VolumeMount is core/v1 VolumeMount.
type VolumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
	ReadOnly  bool   `yaml:"readOnly,omitempty"`
}

// Probe is core/v1 Probe (an HTTP GET only).
type Probe struct {
	HTTPGet       *HTTPGetAction `yaml:"httpGet,omitempty"`
	PeriodSeconds int32          `yaml:"periodSeconds,omitempty"`
}

// HTTPGetAction is core/v1 HTTPGetAction.
type HTTPGetAction struct {
	Path string `yaml:"path"`
	Port int32  `yaml:"port"`
}

// ContainerSecurityContext is core/v1 SecurityContext.
type ContainerSecurityContext struct {
	AllowPrivilegeEscalation *bool         `yaml:"allowPrivilegeEscalation,omitempty"`
	ReadOnlyRootFilesystem   *bool         `yaml:"readOnlyRootFilesystem,omitempty"`
	Capabilities             *Capabilities `yaml:"capabilities,omitempty"`
}

// Capabilities is core/v1 Capabilities.
type Capabilities struct {
	Drop []string `yaml:"drop,omitempty"`
}

// Volume is core/v1 Volume: a ConfigMap, a claim or an emptyDir.
type Volume struct {
	Name                  string           `yaml:"name"`
	ConfigMap             *ConfigMapVolume `yaml:"configMap,omitempty"`
	PersistentVolumeClaim *ClaimVolume     `yaml:"persistentVolumeClaim,omitempty"`
	EmptyDir              *EmptyDirVolume  `yaml:"emptyDir,omitempty"`
}

// ConfigMapVolume is core/v1 ConfigMapVolumeSource.
type ConfigMapVolume struct {
	Name  string      `yaml:"name"`
	Items []KeyToPath `yaml:"items,omitempty"`
}

// KeyToPath is core/v1 KeyToPath.
type KeyToPath struct {
	Key  string `yaml:"key"`
	Path string `yaml:"path"`
}

// ClaimVolume is core/v1 PersistentVolumeClaimVolumeSource.
type ClaimVolume struct {
	ClaimName string `yaml:"claimName"`
}

// EmptyDirVolume is core/v1 EmptyDirVolumeSource.
type EmptyDirVolume struct {
	SizeLimit string `yaml:"sizeLimit,omitempty"`
}

// ClaimSpec is core/v1 PersistentVolumeClaimSpec.
type ClaimSpec struct {
	AccessModes      []string  `yaml:"accessModes"`
	StorageClassName *string   `yaml:"storageClassName,omitempty"`
	Resources        Resources `yaml:"resources"`
}

// DeploymentSpec is apps/v1 DeploymentSpec.
type DeploymentSpec struct {
	Replicas *int32        `yaml:"replicas,omitempty"`
	Selector LabelSelector `yaml:"selector"`
	Template PodTemplate   `yaml:"template"`
}

// ServiceSpec is core/v1 ServiceSpec.
type ServiceSpec struct {
	Selector map[string]string `yaml:"selector"`
	Ports    []ServicePort     `yaml:"ports"`
}

// ServicePort is core/v1 ServicePort.
type ServicePort struct {
	Name       string `yaml:"name"`
	Port       int32  `yaml:"port"`
	TargetPort int32  `yaml:"targetPort"`
}
