package main

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
)

// A world: one request's cluster behind upstream's machinery, wired as
// pkg/scheduler/scheduler.go's New wires it (fake clientset instead of an API server,
// one profile, parallelism 1, no queue).
type world struct {
	ctx      context.Context
	cancel   context.CancelFunc
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	tracker  *resourceslicetracker.Tracker
	snapshot *internalcache.Snapshot
	fw       framework.Framework
	// The plugins of the profile, by name, as the registry's factories made them
	// for the framework (with it as their handle and the profile's args).
	plugins map[string]fwk.Plugin
}

// noNominations: the nominator of an explain cycle. Berth's explain considers no
// nominated pods, and neither does the oracle (kube-scheduler's queue would hand the
// framework the pods nominated by earlier preemptions).
type noNominations struct{}

func (noNominations) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}
func (noNominations) DeleteNominatedPodIfExists(*v1.Pod)                            {}
func (noNominations) UpdateNominatedPod(klog.Logger, *v1.Pod, fwk.PodInfo)          {}
func (noNominations) NominatedPodsForNode(string) []fwk.PodInfo                     { return nil }

// noActivation: there is no queue to move pods in.
type noActivation struct{}

func (noActivation) Activate(klog.Logger, map[string]*v1.Pod) {}

func newWorld(parent context.Context, c *cluster, profile *config.KubeSchedulerProfile, registry frameworkruntime.Registry) (_ *world, err error) {
	ctx, cancel := context.WithCancel(parent)
	w := &world{ctx: ctx, cancel: cancel}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	logger := klog.FromContext(ctx)
	gate := utilfeature.DefaultFeatureGate

	w.client = fake.NewClientset(c.objects...)
	w.factory = informers.NewSharedInformerFactory(w.client, 0)
	var checkers []cache.DoneChecker

	var draManager fwk.SharedDRAManager
	if gate.Enabled(features.DynamicResourceAllocation) {
		claimCache := assumecache.NewAssumeCache(logger, w.factory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
		opts := resourceslicetracker.Options{
			EnableDeviceTaintRules:   gate.Enabled(features.DRADeviceTaintRules),
			EnableConsumableCapacity: gate.Enabled(features.DRAConsumableCapacity),
			SliceInformer:            w.factory.Resource().V1().ResourceSlices(),
			KubeClient:               w.client,
		}
		if opts.EnableDeviceTaintRules {
			opts.TaintInformer = w.factory.Resource().V1().DeviceTaintRules()
		}
		w.tracker, err = resourceslicetracker.StartTracker(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("starting the ResourceSlice tracker: %w", err)
		}
		checkers = append(checkers, w.tracker.HasSyncedChecker())
		manager := dynamicresources.NewDRAManager(ctx, claimCache, w.tracker, w.factory)
		draManager = manager
		// The claim cache's own informer handler: synced once every claim is in it.
		checkers = append(checkers, claimCache.AddEventHandler(cache.ResourceEventHandlerFuncs{}).HasSyncedChecker())
		if gate.Enabled(features.DRAExtendedResource) {
			// As the scheduler's event handlers feed it: the DeviceClasses that
			// name an extended resource.
			erCache := manager.DeviceClassResolver().(*extendedresourcecache.ExtendedResourceCache)
			reg, err := w.factory.Resource().V1().DeviceClasses().Informer().AddEventHandler(erCache)
			if err != nil {
				return nil, fmt.Errorf("the extended resource cache: %w", err)
			}
			checkers = append(checkers, reg.HasSyncedChecker())
		}
	}
	csiManager := nodevolumelimits.NewCSIManager(w.factory.Storage().V1().CSINodes().Lister())

	// The scheduler cache, fed as its event handlers feed it (nodes, assigned pods,
	// pod groups and their members), and its snapshot: the nodes in the order
	// kube-scheduler visits them (its node tree: zone by zone, round robin).
	schedCache := internalcache.New(ctx, nil, gate.Enabled(features.GenericWorkload), gate.Enabled(features.CompositePodGroup))
	for _, n := range c.nodes {
		schedCache.AddNode(logger, n)
	}
	for _, p := range c.boundPods {
		if err := schedCache.AddPod(logger, p); err != nil {
			return nil, fmt.Errorf("adding pod %s/%s to the scheduler cache: %w", p.Namespace, p.Name, err)
		}
	}
	if gate.Enabled(features.GenericWorkload) {
		for _, pg := range c.podGroups {
			schedCache.AddPodGroup(pg)
		}
		for _, p := range c.pendingPods {
			schedCache.AddPodGroupMember(p)
		}
	}
	w.snapshot = internalcache.NewEmptySnapshot()
	if err := schedCache.UpdateSnapshot(logger, w.snapshot); err != nil {
		return nil, fmt.Errorf("the scheduler cache's snapshot: %w", err)
	}

	// The framework builds each plugin of the profile from the registry's factory,
	// with itself as the handle and the profile's args; the oracle keeps the
	// plugins so built, to call every extension point of each directly.
	w.plugins = map[string]fwk.Plugin{}
	capturing := make(frameworkruntime.Registry, len(registry))
	for name, factory := range registry {
		capturing[name] = func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			pl, err := factory(ctx, args, h)
			if err == nil {
				w.plugins[name] = pl
			}
			return pl, err
		}
	}
	w.fw, err = frameworkruntime.NewFramework(ctx, capturing, profile,
		frameworkruntime.WithClientSet(w.client),
		frameworkruntime.WithInformerFactory(w.factory),
		frameworkruntime.WithSharedDRAManager(draManager),
		frameworkruntime.WithSharedCSIManager(csiManager),
		frameworkruntime.WithSnapshotSharedLister(w.snapshot),
		frameworkruntime.WithMutableSnapshotLister(w.snapshot),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
		frameworkruntime.WithParallelism(1),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodsInPreBind(frameworkruntime.NewPodsInPreBindMap()),
		frameworkruntime.WithPodGroupManager(schedCache),
		frameworkruntime.WithPodNominator(noNominations{}),
		frameworkruntime.WithPodActivator(noActivation{}),
	)
	if err != nil {
		return nil, inputErrorf("building the framework of profile %q: %v", profile.SchedulerName, err)
	}

	// Start the informers every plugin asked for, and wait until they, the claim
	// cache, the slice tracker and the extended resource cache have every object.
	w.factory.Start(ctx.Done())
	if res := w.factory.WaitForCacheSyncWithContext(ctx); res.Err != nil {
		return nil, fmt.Errorf("syncing the informers: %w", res.Err)
	}
	if !cache.WaitFor(ctx, "", checkers...) {
		return nil, fmt.Errorf("syncing the DRA caches: %w", context.Cause(ctx))
	}
	return w, nil
}

func (w *world) close() {
	w.cancel()
	if w.tracker != nil {
		w.tracker.Stop()
	}
	if w.factory != nil {
		w.factory.Shutdown()
	}
	if w.fw != nil {
		_ = w.fw.Close()
	}
}
