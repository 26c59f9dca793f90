// Package berth is the Go SDK for Berth scheduler plugins: implement the
// interfaces of the extension points your plugin has, named as kube-scheduler's
// (FilterPlugin, ScorePlugin with ScoreExtensions, PreFilterPlugin, ...), and
// register it once:
//
//	package main
//
//	import berth "example.invalid/berth/sdk-go"
//
//	type Fit struct{}
//
//	func (Fit) Name() string { return "Fit" }
//
//	func (Fit) Filter(state *berth.CycleState, pod *berth.Pod, node *berth.NodeInfo) *berth.Status {
//		return nil
//	}
//
//	func init() { berth.Register(&Fit{}) }
//
//	func main() {}
//
// sdk-go/build.sh turns the package into a component (`go build` for
// GOOS=wasip1 GOARCH=wasm with the bindings berth-go-bindgen generates from
// wit/, then the component made by the same tool); `berth plugin check` loads it.
package berth

import "encoding/json"

// Plugin is what every plugin is (upstream's fwk.Plugin).
type Plugin interface {
	// Name is the plugin's name in profiles.
	Name() string
}

// Configurable plugins take their args from the profile's pluginConfig, as JSON
// ("{}" when none). An error refuses the module.
type Configurable interface {
	Configure(args json.RawMessage) error
}

// PreEnqueuePlugin runs before a pod enters the active queue.
type PreEnqueuePlugin interface {
	Plugin
	PreEnqueue(pod *Pod) *Status
}

// PreFilterResult limits Filter to some nodes; nil means every node.
type PreFilterResult struct {
	NodeNames []string
}

// PreFilterPlugin runs once per scheduling cycle, before Filter.
type PreFilterPlugin interface {
	Plugin
	PreFilter(state *CycleState, pod *Pod) (*PreFilterResult, *Status)
	// PreFilterExtensions keeps the cycle state right when a what-if adds or
	// removes a pod; nil when the state does not depend on other pods.
	PreFilterExtensions() PreFilterExtensions
}

// PreFilterExtensions updates the cycle state for a pod added to or removed from
// a node in a what-if (nominated pods, preemption's dry run).
type PreFilterExtensions interface {
	AddPod(state *CycleState, podToSchedule *Pod, podToAdd *Pod, nodeInfo *NodeInfo) *Status
	RemovePod(state *CycleState, podToSchedule *Pod, podToRemove *Pod, nodeInfo *NodeInfo) *Status
}

// FilterPlugin says whether the pod fits a node.
type FilterPlugin interface {
	Plugin
	Filter(state *CycleState, pod *Pod, nodeInfo *NodeInfo) *Status
}

// PreScorePlugin runs once per cycle before Score, with the feasible nodes.
type PreScorePlugin interface {
	Plugin
	PreScore(state *CycleState, pod *Pod, nodes []*NodeInfo) *Status
}

// NodeScore is a node's score.
type NodeScore struct {
	Name  string
	Score int64
}

// NodeScoreList is the scores of every feasible node.
type NodeScoreList []NodeScore

// ScorePlugin ranks the feasible nodes.
type ScorePlugin interface {
	Plugin
	Score(state *CycleState, pod *Pod, nodeInfo *NodeInfo) (int64, *Status)
	// ScoreExtensions normalizes the scores; nil when they are in [0, 100]
	// already.
	ScoreExtensions() ScoreExtensions
}

// ScoreExtensions rescales a ScorePlugin's scores into [MinNodeScore,
// MaxNodeScore], in place.
type ScoreExtensions interface {
	NormalizeScore(state *CycleState, pod *Pod, scores NodeScoreList) *Status
}

// ReservePlugin reserves what the pod takes on the chosen node.
type ReservePlugin interface {
	Plugin
	Reserve(state *CycleState, pod *Pod, nodeName string) *Status
	Unreserve(state *CycleState, pod *Pod, nodeName string)
}

// PermitPlugin approves, denies or delays the binding; with Wait, the timeout in
// milliseconds.
type PermitPlugin interface {
	Plugin
	Permit(state *CycleState, pod *Pod, nodeName string) (*Status, uint64)
}

// PreBindPlugin runs before the pod is bound.
type PreBindPlugin interface {
	Plugin
	PreBind(state *CycleState, pod *Pod, nodeName string) *Status
}

// BindPlugin binds the pod (Skip: let the next one).
type BindPlugin interface {
	Plugin
	Bind(state *CycleState, pod *Pod, nodeName string) *Status
}

// PostBindPlugin is told the pod was bound.
type PostBindPlugin interface {
	Plugin
	PostBind(state *CycleState, pod *Pod, nodeName string)
}

// QueueingHintFn says whether an event may make a pod this plugin rejected
// schedulable (upstream's fwk.QueueingHintFn).
type QueueingHintFn func(pod *Pod, oldObj, newObj *Object) (QueueingHint, error)

// ClusterEventWithHint is an event that may make a rejected pod schedulable,
// with the hint that decides, or none (every such event requeues).
type ClusterEventWithHint struct {
	Event          ClusterEvent
	QueueingHintFn QueueingHintFn
}

// EnqueueExtensions names the events that may make pods this plugin rejected
// schedulable. A Filter or PreFilter plugin without it is requeued by every
// event, as upstream's.
type EnqueueExtensions interface {
	EventsToRegister() []ClusterEventWithHint
}

// Register makes p the module's plugin; call it once, from an init function.
func Register(p Plugin) {
	if registered != nil {
		panic("berth: Register called twice")
	}
	registered = p
	install()
}

var registered Plugin
