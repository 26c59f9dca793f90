// NodeResourcesAllocatable, a port of kubernetes-sigs/scheduler-plugins' Score
// plugin of that name to Berth's Go SDK: it ranks nodes by their allocatable
// resources, weighted per resource. Mode Least (the default) prefers the nodes
// with the least allocatable (packing work onto small nodes, so that large ones
// stay free); Most the ones with the most.
//
// Build: ../../../sdk-go/build.sh . node_resources_allocatable.wasm
package main

import (
	"encoding/json"
	"fmt"

	berth "example.invalid/berth/sdk-go"
)

// Name is the plugin's name in profiles, as upstream's.
const Name = "NodeResourcesAllocatable"

// ResourceSpec is a resource and its weight (upstream's
// schedulingconfig.ResourceSpec).
type ResourceSpec struct {
	Name   string `json:"name"`
	Weight int64  `json:"weight"`
}

// Args are the plugin's args (upstream's NodeResourcesAllocatableArgs).
type Args struct {
	Resources []ResourceSpec `json:"resources"`
	Mode      string         `json:"mode"`
}

// Allocatable is the plugin.
type Allocatable struct {
	resources []ResourceSpec
	most      bool
}

func (*Allocatable) Name() string { return Name }

// Configure reads the args; upstream's defaults: cpu weighted 1<<20, memory 1,
// mode Least.
func (a *Allocatable) Configure(raw json.RawMessage) error {
	args := Args{
		Resources: []ResourceSpec{{Name: "cpu", Weight: 1 << 20}, {Name: "memory", Weight: 1}},
		Mode:      "Least",
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return fmt.Errorf("args are not a JSON object: %w", err)
	}
	for k := range fields {
		switch k {
		case "apiVersion", "kind", "resources", "mode":
		default:
			return fmt.Errorf("unknown field %q, expected `resources` or `mode`", k)
		}
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return fmt.Errorf("args: %w", err)
	}
	switch args.Mode {
	case "Least":
		a.most = false
	case "Most":
		a.most = true
	default:
		return fmt.Errorf("mode: want Least or Most, got %q", args.Mode)
	}
	for _, r := range args.Resources {
		if r.Weight <= 0 {
			return fmt.Errorf("resources: the weight of %q must be positive, got %d", r.Name, r.Weight)
		}
	}
	a.resources = args.Resources
	return nil
}

// allocatable is a node's allocatable quantity of a resource, in the unit
// upstream's framework.Resource keeps it (millicores for cpu, bytes for memory).
func allocatable(n *berth.NodeInfo, name string) int64 {
	r := &n.Node.Allocatable
	switch name {
	case "cpu":
		return r.MilliCpu
	case "memory":
		return r.Memory
	case "ephemeral-storage":
		return r.EphemeralStorage
	case "pods":
		return r.AllowedPodNumber
	}
	return berth.ScalarResource(r, name)
}

// Score is the weighted sum of the node's allocatable resources, negated in
// mode Least so that smaller nodes score higher.
func (a *Allocatable) Score(_ *berth.CycleState, _ *berth.Pod, n *berth.NodeInfo) (int64, *berth.Status) {
	var sum int64
	for _, r := range a.resources {
		v := allocatable(n, r.Name) * r.Weight
		if !a.most {
			v = -v
		}
		sum += v
	}
	return sum, nil
}

func (a *Allocatable) ScoreExtensions() berth.ScoreExtensions { return a }

// NormalizeScore maps the scores linearly onto [MinNodeScore, MaxNodeScore]; all
// equal, every node gets MinNodeScore, as upstream's.
func (a *Allocatable) NormalizeScore(_ *berth.CycleState, _ *berth.Pod, scores berth.NodeScoreList) *berth.Status {
	if len(scores) == 0 {
		return nil
	}
	lo, hi := scores[0].Score, scores[0].Score
	for _, s := range scores {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	span := hi - lo
	for i := range scores {
		if span == 0 {
			scores[i].Score = berth.MinNodeScore
		} else {
			scores[i].Score = (scores[i].Score-lo)*(berth.MaxNodeScore-berth.MinNodeScore)/span + berth.MinNodeScore
		}
	}
	return nil
}

func init() { berth.Register(&Allocatable{}) }

// main is not called: the module is a reactor whose exports the host calls.
func main() {}
