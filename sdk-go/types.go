package berth

import "example.invalid/berth/sdk-go/internal/wit"

// WITVersion is the version of the WIT package (wit/scheduler.wit) this SDK
// builds plugins against.
const WITVersion = "0.9.4"

// MaxNodeScore is the highest score NormalizeScore may give (upstream's
// framework.MaxNodeScore); MinNodeScore the lowest.
const (
	MaxNodeScore int64 = 100
	MinNodeScore int64 = 0
)

// The cluster's objects, as the host sends them (the types of wit/scheduler.wit,
// generated at build time). Quantities are plain numbers: CPU in millicores,
// memory and storage in bytes, everything else in its own unit.
type (
	// Pod is the pod a cycle works on, or a pod on a node.
	Pod = wit.Pod
	// Node is a node's object.
	Node = wit.Node
	// NodeInfo is a node with what its pods request (upstream's NodeInfo).
	NodeInfo = wit.NodeInfo
	// Resources is a set of quantities (upstream's framework.Resource).
	Resources = wit.Resources
	// Container is one of a pod's containers.
	Container = wit.Container
	// Label is a label or a node selector entry: (key, value).
	Label = wit.Label
	// ResourceList is quantities by resource name, as written in a manifest.
	ResourceList = wit.ResourceList
	// ClusterEvent is a kind of change in the cluster that may make a pod
	// schedulable (upstream's fwk.ClusterEvent).
	ClusterEvent = wit.ClusterEvent
	// EventResource is the kind of object a ClusterEvent is about.
	EventResource = wit.EventResource
	// ActionType is what happened to the object (flags).
	ActionType = wit.ActionType
	// Object is the object of an event, old or new.
	Object = wit.Object
	// QueueingHint is a hint's answer: Queue or QueueSkip.
	QueueingHint = wit.QueueingHint
	// Code is a Status's code.
	Code = wit.Code
	// Status is the outcome of an extension point (upstream's fwk.Status); a nil
	// *Status is Success.
	Status = wit.Status
)

// The status codes, as upstream's.
const (
	Success                      = wit.CodeSuccess
	Error                        = wit.CodeError
	Unschedulable                = wit.CodeUnschedulable
	UnschedulableAndUnresolvable = wit.CodeUnschedulableAndUnresolvable
	Wait                         = wit.CodeWait
	Skip                         = wit.CodeSkip
	Pending                      = wit.CodePending
)

// The queueing hints.
const (
	Queue     = wit.QueueingHintQueue
	QueueSkip = wit.QueueingHintQueueSkip
)

// NewStatus makes a Status (upstream's fwk.NewStatus).
func NewStatus(code Code, reasons ...string) *Status {
	return &Status{Code: code, Reasons: reasons}
}

// AsStatus turns an error into a Status of code Error; nil stays nil.
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return NewStatus(Error, err.Error())
}

// IsSuccess says whether s is nil or has code Success.
func IsSuccess(s *Status) bool { return s == nil || s.Code == Success }

func statusOf(s *Status) Status {
	if s == nil {
		return Status{Code: Success}
	}
	if s.Reasons == nil {
		s.Reasons = []string{}
	}
	return *s
}

// Quantity returns a resource's quantity in a ResourceList (0, false when absent).
func Quantity(list ResourceList, name string) (int64, bool) {
	for _, q := range list {
		if q.F0 == name {
			return q.F1, true
		}
	}
	return 0, false
}

// ScalarResource returns an extended resource's quantity in Resources (0 when
// absent).
func ScalarResource(r *Resources, name string) int64 {
	for _, q := range r.Scalar {
		if q.F0 == name {
			return q.F1
		}
	}
	return 0
}

// CycleState is the state of one scheduling cycle, kept in the host and shared by
// every instance of the plugin that works on the cycle: values are bytes (encode
// them as you like, e.g. with encoding/json).
type CycleState struct {
	h wit.CycleState
}

// Read returns the value written under key in this cycle.
func (s *CycleState) Read(key string) ([]byte, bool) {
	v := s.h.Read(key)
	if v == nil {
		return nil, false
	}
	return *v, true
}

// Write sets the value under key for the rest of the cycle.
func (s *CycleState) Write(key string, value []byte) { s.h.Write(key, value) }

// Delete removes the value under key.
func (s *CycleState) Delete(key string) { s.h.Delete(key) }

// LogLevel is the level of a line sent to the scheduler's log.
type LogLevel = wit.LogLevel

// The log levels.
const (
	LevelTrace = wit.LogLevelTrace
	LevelDebug = wit.LogLevelDebug
	LevelInfo  = wit.LogLevelInfo
	LevelWarn  = wit.LogLevelWarn
	LevelError = wit.LogLevelError
)

// Log sends a line to the scheduler's log, tagged with the plugin's name.
func Log(level LogLevel, message string) { wit.HostLog(level, message) }

// FeatureGate says whether a feature gate of the scheduler is on (false, false
// when the host does not know the gate).
func FeatureGate(name string) (on bool, known bool) {
	v := wit.HostFeatureGate(name)
	if v == nil {
		return false, false
	}
	return *v, true
}
