package main

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// The JSON `berth explain --output json` prints (scheduler/src/framework/explain.rs), the
// parts the oracle computes, with the same field names.

// PluginStatus is one plugin's status.
type PluginStatus struct {
	Plugin  string   `json:"plugin"`
	Code    string   `json:"code"`
	Reasons []string `json:"reasons"`
}

// ScoreEntry is one plugin's score on a node.
type ScoreEntry struct {
	Plugin     string `json:"plugin"`
	Raw        int64  `json:"raw"`
	Normalized int64  `json:"normalized"`
	Weighted   int64  `json:"weighted"`
}

// NodeExplanation is what every plugin said about one node.
type NodeExplanation struct {
	Node     string         `json:"node"`
	Feasible bool           `json:"feasible"`
	Filters  []PluginStatus `json:"filters"`
	Scores   []ScoreEntry   `json:"scores"`
	Total    int64          `json:"total"`
}

// PostFilterExplanation is what PostFilter answered in the cycle's failure path.
// plugin, status and nominated_node are Berth's fields; code and message repeat the
// status the way kube-scheduler logs it.
type PostFilterExplanation struct {
	Plugin        string       `json:"plugin"`
	Code          string       `json:"code"`
	Message       string       `json:"message"`
	NominatedNode *string      `json:"nominated_node"`
	Status        PluginStatus `json:"status"`
}

// Explanation is the whole answer.
type Explanation struct {
	Pod       string            `json:"pod"`
	PreFilter []PluginStatus    `json:"prefilter"`
	Nodes     []NodeExplanation `json:"nodes"`
	// The FailedScheduling message of the cycle, when no node is feasible.
	Message    string                 `json:"message,omitempty"`
	PostFilter *PostFilterExplanation `json:"post_filter,omitempty"`
}

func statusOf(plugin string, s *fwk.Status) PluginStatus {
	reasons := []string{}
	if s != nil {
		reasons = append(reasons, s.Reasons()...)
	}
	return PluginStatus{Plugin: plugin, Code: s.Code().String(), Reasons: reasons}
}

// pluginFailure: a plugin answered Error (or a code its extension point may not
// answer) where explain cannot go on, as Berth's explain fails then.
type pluginFailure struct {
	plugin, point string
	status        *fwk.Status
}

func (e *pluginFailure) Error() string {
	return fmt.Sprintf("%s %s: %s: %s", e.plugin, e.point, e.status.Code(), e.status.Message())
}

// pluginAs is the profile's plugin name, as the extension point's interface.
func pluginAs[T any](w *world, name string) (T, error) {
	pl, ok := w.plugins[name].(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("the framework lists plugin %q at an extension point it does not implement (or the registry made no %q)", name, name)
	}
	return pl, nil
}

// explain mirrors Berth's Framework::explain: every PreFilter plugin, then every
// Filter plugin on every node (no stopping at the first failure), then PreScore,
// Score and NormalizeScore over the feasible nodes; each plugin called directly.
//
// scoreNodes, when not nil, are the nodes to score instead, in that order, feasible
// or not (as Berth's ExplainOptions.score_nodes, for conformance cases written from
// upstream's score tests).
func (w *world) explain(pod *v1.Pod, scoreNodes []string) (*Explanation, error) {
	ctx := w.ctx
	listed := w.fw.ListPlugins()
	nodeInfos, err := w.snapshot.NodeInfos().List()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(nodeInfos))
	for i, n := range nodeInfos {
		names[i] = n.Node().Name
	}
	filters := make([][]PluginStatus, len(nodeInfos))
	has := func(i int, plugin string) bool {
		for _, e := range filters[i] {
			if e.Plugin == plugin {
				return true
			}
		}
		return false
	}

	state := framework.NewCycleState()
	state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())

	// PreFilter: every plugin, recorded.
	out := &Explanation{Pod: pod.Namespace + "/" + pod.Name, PreFilter: []PluginStatus{}}
	skip := sets.New[string]()
	rejectedBy := map[string]*fwk.Status{}
	for _, p := range listed.PreFilter.Enabled {
		pl, err := pluginAs[fwk.PreFilterPlugin](w, p.Name)
		if err != nil {
			return nil, err
		}
		result, status := pl.PreFilter(ctx, state, pod, nodeInfos)
		out.PreFilter = append(out.PreFilter, statusOf(p.Name, status))
		switch {
		case status.IsSkip():
			skip.Insert(p.Name)
		case status.IsSuccess():
			if !result.AllNodes() {
				leftOut := fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
					fmt.Sprintf("node(s) didn't satisfy plugin(s) [%s]", p.Name))
				for i, name := range names {
					if !result.NodeNames.Has(name) {
						filters[i] = append(filters[i], statusOf(p.Name, leftOut))
					}
				}
			}
		default:
			rejectedBy[p.Name] = status
		}
	}
	state.SetSkipFilterPlugins(skip)

	// Filter: every plugin on every node.
	for _, p := range listed.Filter.Enabled {
		if skip.Has(p.Name) {
			continue
		}
		if status, ok := rejectedBy[p.Name]; ok {
			// Its PreFilter already rejected the pod everywhere.
			for i := range nodeInfos {
				filters[i] = append(filters[i], statusOf(p.Name, status))
			}
			continue
		}
		pl, err := pluginAs[fwk.FilterPlugin](w, p.Name)
		if err != nil {
			return nil, err
		}
		for i, n := range nodeInfos {
			status := pl.Filter(ctx, state, pod, n)
			// A node the PreFilter result left out already has this plugin's entry.
			if !has(i, p.Name) {
				filters[i] = append(filters[i], statusOf(p.Name, status))
			}
		}
	}
	feasible := func(i int) bool {
		if len(rejectedBy) > 0 {
			return false
		}
		for _, e := range filters[i] {
			if e.Code != fwk.Success.String() {
				return false
			}
		}
		return true
	}

	// PreScore, Score and NormalizeScore over the feasible nodes (or those asked).
	var feasibleNodes []fwk.NodeInfo
	var feasibleIndex []int
	anyFeasible := false
	for i, n := range nodeInfos {
		if feasible(i) {
			anyFeasible = true
			if scoreNodes == nil {
				feasibleNodes = append(feasibleNodes, n)
				feasibleIndex = append(feasibleIndex, i)
			}
		}
	}
	for _, name := range scoreNodes {
		for i, n := range nodeInfos {
			if names[i] == name {
				feasibleNodes = append(feasibleNodes, n)
				feasibleIndex = append(feasibleIndex, i)
			}
		}
	}
	scores := make([][]ScoreEntry, len(nodeInfos))
	if len(feasibleNodes) > 0 {
		skipScore := sets.New[string]()
		for _, p := range listed.PreScore.Enabled {
			pl, err := pluginAs[fwk.PreScorePlugin](w, p.Name)
			if err != nil {
				return nil, err
			}
			status := pl.PreScore(ctx, state, pod, feasibleNodes)
			switch {
			case status.IsSuccess():
			case status.IsSkip():
				skipScore.Insert(p.Name)
			default:
				return nil, &pluginFailure{p.Name, "PreScore", status}
			}
		}
		state.SetSkipScorePlugins(skipScore)
		for _, p := range listed.Score.Enabled {
			raw := make([]int64, len(feasibleNodes))
			normalized := make([]int64, len(feasibleNodes))
			if !skipScore.Has(p.Name) {
				pl, err := pluginAs[fwk.ScorePlugin](w, p.Name)
				if err != nil {
					return nil, err
				}
				list := make(fwk.NodeScoreList, len(feasibleNodes))
				for k, n := range feasibleNodes {
					s, status := pl.Score(ctx, state, pod, n)
					if !status.IsSuccess() {
						return nil, &pluginFailure{p.Name, "Score", status}
					}
					raw[k] = s
					list[k] = fwk.NodeScore{Name: n.Node().Name, Score: s}
				}
				if ext := pl.ScoreExtensions(); ext != nil {
					if status := ext.NormalizeScore(ctx, state, pod, list); !status.IsSuccess() {
						return nil, &pluginFailure{p.Name, "NormalizeScore", status}
					}
				}
				for k := range list {
					normalized[k] = list[k].Score
				}
			}
			for k, i := range feasibleIndex {
				scores[i] = append(scores[i], ScoreEntry{
					Plugin:     p.Name,
					Raw:        raw[k],
					Normalized: normalized[k],
					Weighted:   normalized[k] * int64(p.Weight),
				})
			}
		}
	}

	out.Nodes = make([]NodeExplanation, len(nodeInfos))
	for i := range nodeInfos {
		n := NodeExplanation{Node: names[i], Feasible: feasible(i), Filters: filters[i], Scores: scores[i]}
		if n.Filters == nil {
			n.Filters = []PluginStatus{}
		}
		if n.Scores == nil {
			n.Scores = []ScoreEntry{}
		}
		for _, s := range n.Scores {
			n.Total += s.Weighted
		}
		out.Nodes[i] = n
	}
	if !anyFeasible {
		if err := w.failure(pod, nodeInfos, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// failure is the scheduling cycle's failure path, by the framework's own runners as
// schedule_one.go drives them: the Diagnosis of findNodesThatFitPod (PreFilter, then
// every node through the Filter plugins, each stopping at its first rejection), then
// RunPostFilterPlugins, then the FitError's message.
func (w *world) failure(pod *v1.Pod, nodeInfos []fwk.NodeInfo, out *Explanation) error {
	ctx := w.ctx
	if len(nodeInfos) == 0 {
		// schedulePod's ErrNoNodesAvailable; no PostFilter.
		out.Message = "no nodes available to schedule pods"
		return nil
	}
	state := framework.NewCycleState()
	state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
	diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	preRes, s, unschedulablePlugins := w.fw.RunPreFilterPlugins(ctx, state, pod)
	diagnosis.UnschedulablePlugins = unschedulablePlugins
	if !s.IsSuccess() {
		if !s.IsRejected() {
			// Not a FitError: the cycle ends in an error, and its message is the
			// error's.
			out.Message = s.AsError().Error()
			return nil
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(s)
		diagnosis.PreFilterMsg = s.Message()
		diagnosis.AddPluginStatus(s)
	} else {
		nodes := nodeInfos
		if !preRes.AllNodes() {
			nodes = nil
			for _, n := range nodeInfos {
				if preRes.NodeNames.Has(n.Node().Name) {
					nodes = append(nodes, n)
				}
			}
			diagnosis.NodeToStatus.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
				fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(unschedulablePlugins))))
		}
		feasible := 0
		for _, n := range nodes {
			status := w.fw.RunFilterPluginsWithNominatedPods(ctx, state, pod, n)
			if status.Code() == fwk.Error {
				out.Message = status.AsError().Error()
				return nil
			}
			if status.IsSuccess() {
				feasible++
				continue
			}
			diagnosis.NodeToStatus.Set(n.Node().Name, status)
			diagnosis.AddPluginStatus(status)
		}
		if feasible > 0 {
			// The framework's runners found a node the per-plugin calls did not:
			// no FitError to report (a disagreement worth a look).
			out.Message = fmt.Sprintf("oracle: the framework's Filter runners find %d feasible node(s) where the plugins called one by one find none", feasible)
			return nil
		}
	}
	fitErr := &framework.FitError{Pod: pod, NumAllNodes: len(nodeInfos), Diagnosis: diagnosis}
	if w.fw.HasPostFilterPlugins() {
		result, status := w.fw.RunPostFilterPlugins(ctx, state, pod, diagnosis.NodeToStatus)
		fitErr.Diagnosis.PostFilterMsg = status.Message()
		plugin := ""
		if status != nil {
			plugin = status.Plugin()
		}
		if plugin == "" {
			// A Success carries no plugin name (the runner returns the plugin's
			// status as it is): the plugin that answered it is the first of the
			// profile's PostFilter plugins that can succeed. Of the in-tree
			// plugins only DynamicResources never does (it deallocates claims and
			// answers Unschedulable).
			for _, p := range w.fw.ListPlugins().PostFilter.Enabled {
				if p.Name != names.DynamicResources {
					plugin = p.Name
					break
				}
			}
		}
		pf := &PostFilterExplanation{
			Plugin:  plugin,
			Code:    status.Code().String(),
			Message: status.Message(),
			Status:  statusOf(plugin, status),
		}
		if result != nil && result.NominatingInfo != nil && result.NominatedNodeName != "" {
			name := result.NominatedNodeName
			pf.NominatedNode = &name
		}
		out.PostFilter = pf
	}
	out.Message = fitErr.Error()
	return nil
}
