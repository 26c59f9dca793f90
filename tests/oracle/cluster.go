package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/scheduling"
	podregistry "k8s.io/kubernetes/pkg/registry/core/pod"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"

	// The API server's defaulting functions for the objects read, in legacyscheme.
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	_ "k8s.io/kubernetes/pkg/apis/scheduling/install"
	_ "k8s.io/kubernetes/pkg/apis/storage/install"
)

// The cluster a request describes, as the API server would hold it: the documents
// applied in order (a later document replaces an earlier one of the same kind,
// namespace and name; Berth's delete annotation removes it), defaulted, admitted.
type cluster struct {
	// Every object, for the fake clientset (in document order).
	objects []runtime.Object
	nodes   []*v1.Node
	// Pods bound to a node (spec.nodeName) and not terminal: the scheduler cache's.
	boundPods []*v1.Pod
	// Pods not bound yet.
	pendingPods []*v1.Pod
	podGroups   []*schedulingv1beta1.PodGroup
	warnings    []string
}

// What the resourceclaim controller writes on a claim it makes from a template.
const podClaimNameAnnotation = "resource.kubernetes.io/pod-claim-name"

// buildCluster applies the parsed documents (deep copies: the parse may be reused)
// and does what the API server and the controllers the scheduler relies on would do
// to them (see README.md, "Defaulting and admission").
func buildCluster(p *parsed) (*cluster, error) {
	type entry struct {
		obj    runtime.Object
		source string
	}
	var order []string
	byKey := map[string]*entry{}
	for _, po := range p.objects {
		obj := po.obj.DeepCopyObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", po.source, err)
		}
		if !clusterScoped[po.gvk.Kind] && m.GetNamespace() == "" {
			m.SetNamespace(metav1.NamespaceDefault)
		}
		key := po.gvk.Kind + "/" + m.GetNamespace() + "/" + m.GetName()
		if po.deletes {
			if _, ok := byKey[key]; !ok {
				return nil, inputErrorf("%s: deletes %s %s/%s, which no earlier document made", po.source, po.gvk.Kind, m.GetNamespace(), m.GetName())
			}
			delete(byKey, key)
			continue
		}
		if _, ok := byKey[key]; !ok {
			order = append(order, key)
		}
		// The object's type information is what the clientset's tracker files it by.
		obj.GetObjectKind().SetGroupVersionKind(po.gvk)
		byKey[key] = &entry{obj: obj, source: po.source}
	}

	c := &cluster{warnings: p.warnings}
	classes := map[string]*schedulingv1.PriorityClass{}
	templates := map[string]*resourcev1.ResourceClaimTemplate{}
	claims := map[string]*resourcev1.ResourceClaim{}
	var storageClasses []*storagev1.StorageClass
	var pods []*v1.Pod
	var podSources []string
	var pvcs []*v1.PersistentVolumeClaim
	var pvs []*v1.PersistentVolume
	for _, key := range order {
		e, ok := byKey[key]
		if !ok {
			continue
		}
		obj := e.obj
		legacyscheme.Scheme.Default(obj)
		m, _ := meta.Accessor(obj)
		if m.GetUID() == "" {
			kind := obj.GetObjectKind().GroupVersionKind().Kind
			if kind == "Pod" {
				m.SetUID(derivedUID(m.GetNamespace(), m.GetName()))
			} else {
				m.SetUID(derivedUID(m.GetNamespace(), lower(kind)+"/"+m.GetName()))
			}
		}
		switch o := obj.(type) {
		case *v1.Pod:
			if err := prepareForCreate(o); err != nil {
				return nil, fmt.Errorf("%s: %v", e.source, err)
			}
			pods = append(pods, o)
			podSources = append(podSources, e.source)
		case *schedulingv1.PriorityClass:
			classes[o.Name] = o
		case *resourcev1.ResourceClaimTemplate:
			templates[o.Namespace+"/"+o.Name] = o
		case *resourcev1.ResourceClaim:
			claims[o.Namespace+"/"+o.Name] = o
		case *storagev1.StorageClass:
			storageClasses = append(storageClasses, o)
		case *v1.PersistentVolumeClaim:
			pvcs = append(pvcs, o)
		case *v1.PersistentVolume:
			pvs = append(pvs, o)
		}
		c.objects = append(c.objects, obj)
	}

	// The built-in PriorityClasses every API server creates.
	for _, pc := range systemPriorityClasses() {
		if _, ok := classes[pc.Name]; !ok {
			legacyscheme.Scheme.Default(pc)
			classes[pc.Name] = pc
			c.objects = append(c.objects, pc)
		}
	}

	// DefaultStorageClass admission: a claim naming no class gets the default one.
	if def, err := defaultStorageClass(storageClasses); err != nil {
		return nil, err
	} else if def != nil {
		for _, pvc := range pvcs {
			if pvc.Spec.StorageClassName == nil {
				name := def.Name
				pvc.Spec.StorageClassName = &name
			}
		}
	}

	volumePhases(pvs, pvcs)

	for i, pod := range pods {
		if err := admitPriority(pod, classes); err != nil {
			return nil, inputErrorf("%s: %v", podSources[i], err)
		}
		for _, claim := range claimsFromTemplates(pod, templates, claims) {
			claims[claim.Namespace+"/"+claim.Name] = claim
			c.objects = append(c.objects, claim)
		}
	}

	// What the informers get: the objects as the API server stores and serves them
	// (encoded: empty lists and maps become absent ones).
	objects := c.objects
	c.objects = c.objects[:0]
	for _, obj := range objects {
		obj, err := roundTrip(obj)
		if err != nil {
			return nil, err
		}
		switch o := obj.(type) {
		case *v1.Node:
			c.nodes = append(c.nodes, o)
		case *schedulingv1beta1.PodGroup:
			c.podGroups = append(c.podGroups, o)
		case *v1.Pod:
			switch {
			case o.Status.Phase == v1.PodSucceeded || o.Status.Phase == v1.PodFailed:
				// Not in the scheduler's pod informer (its field selector leaves
				// them out).
				continue
			case o.Spec.NodeName != "":
				c.boundPods = append(c.boundPods, o)
			default:
				c.pendingPods = append(c.pendingPods, o)
			}
		}
		c.objects = append(c.objects, obj)
	}
	return c, nil
}

// roundTrip encodes and decodes an object, as storing it in the API server and
// reading it back does.
func roundTrip(obj runtime.Object) (runtime.Object, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(data, out); err != nil {
		return nil, err
	}
	return out, nil
}

// prepareForCreate runs the API server's pod strategy on a pod being created
// (pkg/registry/core/pod Strategy.PrepareForCreate, on the internal type): it drops
// the fields of disabled features, merges matchLabelKeys and mismatchLabelKeys into
// the pod (anti-)affinity terms' and topology spread constraints' selectors, and
// defaults pod-level resources. The strategy also resets the status; a cluster file's
// pod keeps the status it states (the kubelet's and controllers' writes since), only
// its empty phase, QoS class and conditions are taken from the strategy's.
func prepareForCreate(pod *v1.Pod) error {
	internal := &api.Pod{}
	if err := legacyscheme.Scheme.Convert(pod, internal, nil); err != nil {
		return err
	}
	podregistry.Strategy.PrepareForCreate(context.Background(), internal)
	prepared := &v1.Pod{}
	if err := legacyscheme.Scheme.Convert(internal, prepared, nil); err != nil {
		return err
	}
	status := pod.Status
	if status.Phase == "" {
		status.Phase = prepared.Status.Phase
	}
	if status.QOSClass == "" {
		status.QOSClass = prepared.Status.QOSClass
	}
	if len(status.Conditions) == 0 {
		status.Conditions = prepared.Status.Conditions
	}
	gvk := pod.GroupVersionKind()
	*pod = *prepared
	pod.Status = status
	pod.SetGroupVersionKind(gvk)
	return nil
}

// derivedUID: a stable UID for an object that states none (the API server would make
// a random one), as Berth derives it: a version-8 UUID made of the SHA-256 of
// "namespace/name".
func derivedUID(namespace, name string) types.UID {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	b := sum[:16]
	b[6] = (b[6] & 0x0f) | 0x80
	b[8] = (b[8] & 0x3f) | 0x80
	h := hex.EncodeToString(b)
	return types.UID(h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:])
}

func lower(s string) string {
	out := []byte(s)
	for i, ch := range out {
		if ch >= 'A' && ch <= 'Z' {
			out[i] = ch + ('a' - 'A')
		}
	}
	return string(out)
}

// systemPriorityClasses: the two classes the API server creates at start.
func systemPriorityClasses() []*schedulingv1.PriorityClass {
	make := func(name string, value int32, description string) *schedulingv1.PriorityClass {
		pc := &schedulingv1.PriorityClass{
			ObjectMeta:  metav1.ObjectMeta{Name: name, UID: derivedUID("", "priorityclass/"+name)},
			Value:       value,
			Description: description,
		}
		pc.SetGroupVersionKind(schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"))
		return pc
	}
	return []*schedulingv1.PriorityClass{
		make(scheduling.SystemNodeCritical, scheduling.SystemCriticalPriority+1000,
			"Used for system critical pods that must not be moved from their current node."),
		make(scheduling.SystemClusterCritical, scheduling.SystemCriticalPriority,
			"Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."),
	}
}

// admitPriority does what the Priority admission plugin does to a pod being created
// that states no spec.priority: the priority (and, unless the pod states one, the
// preemption policy) of its PriorityClass, or of the global default class (the lowest
// valued, if several), or 0. A pod that states spec.priority keeps it (the plugin
// would reject one that disagrees with its class; Berth takes it as written).
func admitPriority(pod *v1.Pod, classes map[string]*schedulingv1.PriorityClass) error {
	if pod.Spec.Priority != nil {
		return nil
	}
	var pc *schedulingv1.PriorityClass
	if name := pod.Spec.PriorityClassName; name != "" {
		pc = classes[name]
		if pc == nil {
			return fmt.Errorf("spec.priorityClassName: no PriorityClass with name %s was found", name)
		}
	} else {
		for _, c := range classes {
			if c.GlobalDefault && (pc == nil || c.Value < pc.Value || (c.Value == pc.Value && c.Name < pc.Name)) {
				pc = c
			}
		}
	}
	value := int32(scheduling.DefaultPriorityWhenNoDefaultClassExists)
	policy := v1.PreemptLowerPriority
	if pc != nil {
		pod.Spec.PriorityClassName = pc.Name
		value = pc.Value
		if pc.PreemptionPolicy != nil {
			policy = *pc.PreemptionPolicy
		}
	}
	pod.Spec.Priority = &value
	if pod.Spec.PreemptionPolicy == nil {
		pod.Spec.PreemptionPolicy = &policy
	} else if *pod.Spec.PreemptionPolicy != policy {
		return fmt.Errorf("spec.preemptionPolicy %s: the priority admission plugin computes %s from the PriorityClass", *pod.Spec.PreemptionPolicy, policy)
	}
	return nil
}

// volumePhases: the phase the PersistentVolume controller gives a volume that states
// none or Pending (the API server's defaulting makes it Pending; the controller makes
// it Available, or Bound once the claim its claimRef names is bound to it). VolumeBinding only
// offers Available volumes to unbound claims.
func volumePhases(pvs []*v1.PersistentVolume, pvcs []*v1.PersistentVolumeClaim) {
	for _, pv := range pvs {
		if pv.Status.Phase != "" && pv.Status.Phase != v1.VolumePending {
			continue
		}
		pv.Status.Phase = v1.VolumeAvailable
		if ref := pv.Spec.ClaimRef; ref != nil {
			for _, pvc := range pvcs {
				if pvc.Namespace == ref.Namespace && pvc.Name == ref.Name && pvc.Spec.VolumeName == pv.Name &&
					(ref.UID == "" || ref.UID == pvc.UID) {
					pv.Status.Phase = v1.VolumeBound
				}
			}
		}
	}
}

// defaultStorageClass is the class the DefaultStorageClass admission plugin gives a
// claim that names none: upstream's own choice (pkg/volume/util GetDefaultClass).
func defaultStorageClass(classes []*storagev1.StorageClass) (*storagev1.StorageClass, error) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range classes {
		if err := indexer.Add(c); err != nil {
			return nil, err
		}
	}
	return volumeutil.GetDefaultClass(storagelisters.NewStorageClassLister(indexer))
}

// claimsFromTemplates does what kube-controller-manager's resourceclaim controller
// does for a pod whose spec.resourceClaims name a ResourceClaimTemplate: make the
// claim from the template, owned by the pod, and record its name in the pod's
// status.resourceClaimStatuses. The API server would complete the generated name
// with five random characters; here they are derived from the pod's UID and the
// entry, as Berth derives them. A template that does not exist leaves the entry
// without a claim (the scheduler then waits for it).
func claimsFromTemplates(pod *v1.Pod, templates map[string]*resourcev1.ResourceClaimTemplate,
	claims map[string]*resourcev1.ResourceClaim) []*resourcev1.ResourceClaim {
	var made []*resourcev1.ResourceClaim
	for _, rc := range pod.Spec.ResourceClaims {
		if rc.ResourceClaimTemplateName == nil {
			continue
		}
		done := false
		for _, s := range pod.Status.ResourceClaimStatuses {
			if s.Name == rc.Name {
				done = true
			}
		}
		if done {
			continue
		}
		t := templates[pod.Namespace+"/"+*rc.ResourceClaimTemplateName]
		if t == nil {
			continue
		}
		name := fmt.Sprintf("%s-%s-%s", pod.Name, rc.Name, claimSuffix(pod.UID, rc.Name))
		pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses,
			v1.PodResourceClaimStatus{Name: rc.Name, ResourceClaimName: &name})
		if existing := claims[pod.Namespace+"/"+name]; existing != nil {
			continue
		}
		annotations := map[string]string{}
		for k, v := range t.Spec.Annotations {
			annotations[k] = v
		}
		annotations[podClaimNameAnnotation] = rc.Name
		yes := true
		claim := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Namespace:   pod.Namespace,
				UID:         derivedUID(pod.Namespace, "resourceclaim/"+name),
				Labels:      t.Spec.Labels,
				Annotations: annotations,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
					Controller: &yes, BlockOwnerDeletion: &yes,
				}},
			},
			Spec: *t.Spec.Spec.DeepCopy(),
		}
		claim.SetGroupVersionKind(resourcev1.SchemeGroupVersion.WithKind("ResourceClaim"))
		made = append(made, claim)
	}
	return made
}

// claimSuffix: five characters of the generated-name alphabet, from the SHA-256 of
// "UID/entry" (Berth's derivation).
func claimSuffix(uid types.UID, entry string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	sum := sha256.Sum256([]byte(string(uid) + "/" + entry))
	out := make([]byte, 5)
	for i := range out {
		out[i] = alphabet[int(sum[i])%len(alphabet)]
	}
	return string(out)
}

// pod is the pending pod namespace/name, if the files have it.
func (c *cluster) pod(namespace, name string) *v1.Pod {
	for _, p := range c.pendingPods {
		if p.Namespace == namespace && p.Name == name {
			return p
		}
	}
	return nil
}
