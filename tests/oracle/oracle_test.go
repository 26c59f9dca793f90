package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// The examples' cluster: three nodes (small-1, large-1, and gpu-1 tainted
// dedicated=gpu), pending pods web-1 (fits small-1 and large-1) and huge (fits none).
var example = filepath.Join("..", "..", "examples", "cluster.yaml")

func explainExample(t *testing.T, o *oracle, pod string) *Explanation {
	t.Helper()
	e, _, err := o.run(context.Background(), &request{Files: []string{example}, Pod: pod})
	if err != nil {
		t.Fatalf("explain %s: %v", pod, err)
	}
	return e
}

func node(t *testing.T, e *Explanation, name string) NodeExplanation {
	t.Helper()
	for _, n := range e.Nodes {
		if n.Node == name {
			return n
		}
	}
	t.Fatalf("no node %s in %+v", name, e.Nodes)
	return NodeExplanation{}
}

func filter(n NodeExplanation, plugin string) *PluginStatus {
	for i := range n.Filters {
		if n.Filters[i].Plugin == plugin {
			return &n.Filters[i]
		}
	}
	return nil
}

func TestExamplePodThatFits(t *testing.T) {
	o, err := newOracle()
	if err != nil {
		t.Fatal(err)
	}
	e := explainExample(t, o, "default/web-1")
	if e.Pod != "default/web-1" || len(e.Nodes) != 3 || e.Message != "" || e.PostFilter != nil {
		t.Fatalf("unexpected explanation: %+v", e)
	}
	// The default profile's PreFilter plugins, in upstream 1.37's order.
	if len(e.PreFilter) == 0 || e.PreFilter[0].Plugin != "NodeName" {
		t.Errorf("PreFilter starts with %+v, want NodeName", e.PreFilter)
	}
	gpu := node(t, e, "gpu-1")
	if gpu.Feasible || len(gpu.Scores) != 0 {
		t.Errorf("gpu-1: %+v, want infeasible and unscored", gpu)
	}
	if f := filter(gpu, "TaintToleration"); f == nil || f.Code != "UnschedulableAndUnresolvable" ||
		len(f.Reasons) != 1 || f.Reasons[0] != "node(s) had untolerated taint(s)" {
		t.Errorf("gpu-1 TaintToleration: %+v", f)
	}
	for _, name := range []string{"small-1", "large-1"} {
		n := node(t, e, name)
		if !n.Feasible || len(n.Scores) == 0 {
			t.Errorf("%s: %+v, want feasible and scored", name, n)
		}
		var total int64
		for _, s := range n.Scores {
			total += s.Weighted
			if s.Plugin == "TaintToleration" && s.Weighted != 3*s.Normalized {
				t.Errorf("%s: TaintToleration weighs 3: %+v", name, s)
			}
		}
		if total != n.Total {
			t.Errorf("%s: total %d, the scores add to %d", name, n.Total, total)
		}
	}
}

func TestExamplePodThatFitsNowhere(t *testing.T) {
	o, err := newOracle()
	if err != nil {
		t.Fatal(err)
	}
	e := explainExample(t, o, "default/huge")
	for _, n := range e.Nodes {
		if n.Feasible {
			t.Errorf("%s is feasible", n.Node)
		}
	}
	if !strings.HasPrefix(e.Message, "0/3 nodes are available: ") || !strings.Contains(e.Message, "Insufficient cpu") {
		t.Errorf("message %q", e.Message)
	}
	if e.PostFilter == nil || e.PostFilter.Code != "Unschedulable" || e.PostFilter.NominatedNode != nil {
		t.Errorf("post_filter %+v", e.PostFilter)
	}
}

func TestServe(t *testing.T) {
	o, err := newOracle()
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(example)
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Join([]string{
		`{"files":["` + abs + `"],"pod":"default/web-1"}`,
		`{"files":["` + abs + `"],"pod":"default/nobody"}`,
		`{"yaml":"apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {pods: '1'}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n","pod":"default/p","feature_gates":"GenericWorkload=true"}`,
		`not json`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if code := serve(o, strings.NewReader(in), &out); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d answers: %q", len(lines), lines)
	}
	var first Explanation
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Pod != "default/web-1" {
		t.Errorf("first answer %q: %v", lines[0], err)
	}
	for i, want := range map[int]string{1: "no pending pod default/nobody", 3: "bad request"} {
		var answer map[string]string
		if err := json.Unmarshal([]byte(lines[i]), &answer); err != nil || !strings.Contains(answer["error"], want) {
			t.Errorf("answer %d: %q, want an error with %q", i, lines[i], want)
		}
	}
	var third Explanation
	if err := json.Unmarshal([]byte(lines[2]), &third); err != nil || len(third.Nodes) != 1 || !third.Nodes[0].Feasible {
		t.Errorf("third answer %q: %v", lines[2], err)
	}
}
