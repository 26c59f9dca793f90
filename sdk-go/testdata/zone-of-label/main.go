// ZoneOfLabel, a fixture of the Go SDK's PreFilter, CycleState and Filter path: a
// pod labelled example.com/zone=Z fits only nodes labelled
// topology.kubernetes.io/zone=Z. PreFilter reads the pod's label once and writes it
// to the cycle state; Filter reads it from there for every node. A pod without the
// label is skipped (PreFilter answers Skip, so Filter is not called).
package main

import (
	berth "example.invalid/berth/sdk-go"
)

const (
	podLabel  = "example.com/zone"
	nodeLabel = "topology.kubernetes.io/zone"
	stateKey  = "ZoneOfLabel/zone"
)

type ZoneOfLabel struct{}

func (ZoneOfLabel) Name() string { return "ZoneOfLabel" }

func label(labels []berth.Label, key string) (string, bool) {
	for _, l := range labels {
		if l.F0 == key {
			return l.F1, true
		}
	}
	return "", false
}

func (ZoneOfLabel) PreFilter(state *berth.CycleState, pod *berth.Pod) (*berth.PreFilterResult, *berth.Status) {
	zone, ok := label(pod.Labels, podLabel)
	if !ok {
		return nil, berth.NewStatus(berth.Skip)
	}
	state.Write(stateKey, []byte(zone))
	berth.Log(berth.LevelDebug, "ZoneOfLabel: pod "+pod.Name+" wants zone "+zone)
	return nil, nil
}

func (ZoneOfLabel) PreFilterExtensions() berth.PreFilterExtensions { return nil }

func (ZoneOfLabel) Filter(state *berth.CycleState, _ *berth.Pod, node *berth.NodeInfo) *berth.Status {
	want, ok := state.Read(stateKey)
	if !ok {
		return berth.NewStatus(berth.Error, "ZoneOfLabel: no zone in the cycle state")
	}
	if zone, _ := label(node.Node.Labels, nodeLabel); zone != string(want) {
		return berth.NewStatus(berth.UnschedulableAndUnresolvable, "node(s) are not in zone "+string(want))
	}
	return nil
}

func init() { berth.Register(ZoneOfLabel{}) }

func main() {}
