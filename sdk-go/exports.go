package berth

import (
	"encoding/json"
	"fmt"

	"example.invalid/berth/sdk-go/internal/wit"
)

// The instance's replica of the nodes, by slot (the host sends what changed), and
// the pod of the current cycle.
var (
	nodes      []*NodeInfo
	pod        *Pod
	lastScored []uint32
)

// guest answers every export of the world for the registered plugin.
type guest struct{}

func install() {
	g := guest{}
	wit.ExportPlugin = g
	wit.ExportReplica = g
	wit.ExportCycle = g
	wit.ExportQueueSort = g
	wit.ExportEnqueueExtensions = g
	wit.ExportPreEnqueue = g
	wit.ExportPreFilter = g
	wit.ExportPreFilterExtensions = g
	wit.ExportFilter = g
	wit.ExportPostFilter = g
	wit.ExportPreScore = g
	wit.ExportScore = g
	wit.ExportReserve = g
	wit.ExportPermit = g
	wit.ExportPreBind = g
	wit.ExportBind = g
	wit.ExportPostBind = g
	wit.ExportSign = g
	wit.ExportSelectVictims = g
}

func notImplemented(point string) wit.Status {
	return wit.Status{Code: Error, Reasons: []string{registered.Name() + " does not implement " + point}}
}

func node(slot uint32) *NodeInfo {
	if int(slot) < len(nodes) && nodes[slot] != nil {
		return nodes[slot]
	}
	panic(fmt.Sprintf("berth: slot %d is not in the replica", slot))
}

func state(h wit.CycleState) *CycleState { return &CycleState{h: h} }

// Info: the extension points are the interfaces the plugin's type implements.
func (guest) Info() wit.PluginInfo {
	p := registered
	var points []wit.ExtensionPoint
	add := func(ok bool, e wit.ExtensionPoint) {
		if ok {
			points = append(points, e)
		}
	}
	_, preEnqueue := p.(PreEnqueuePlugin)
	add(preEnqueue, wit.ExtensionPointPreEnqueue)
	pf, preFilter := p.(PreFilterPlugin)
	add(preFilter, wit.ExtensionPointPreFilter)
	_, filter := p.(FilterPlugin)
	add(filter, wit.ExtensionPointFilter)
	_, preScore := p.(PreScorePlugin)
	add(preScore, wit.ExtensionPointPreScore)
	sp, score := p.(ScorePlugin)
	add(score, wit.ExtensionPointScore)
	add(score && sp.ScoreExtensions() != nil, wit.ExtensionPointNormalizeScore)
	_, reserve := p.(ReservePlugin)
	add(reserve, wit.ExtensionPointReserve)
	_, permit := p.(PermitPlugin)
	add(permit, wit.ExtensionPointPermit)
	_, preBind := p.(PreBindPlugin)
	add(preBind, wit.ExtensionPointPreBind)
	_, bind := p.(BindPlugin)
	add(bind, wit.ExtensionPointBind)
	_, postBind := p.(PostBindPlugin)
	add(postBind, wit.ExtensionPointPostBind)
	if points == nil {
		points = []wit.ExtensionPoint{}
	}
	info := wit.PluginInfo{
		Name:                p.Name(),
		ExtensionPoints:     points,
		WitVersion:          WITVersion,
		WantsPods:           false,
		PreFilterExtensions: preFilter && pf.PreFilterExtensions() != nil,
	}
	if wp, ok := p.(interface{ WantsPods() bool }); ok {
		info.WantsPods = wp.WantsPods()
	}
	if ee, ok := p.(EnqueueExtensions); ok {
		events := []wit.EventRegistration{}
		for _, e := range ee.EventsToRegister() {
			events = append(events, wit.EventRegistration{Event: e.Event, HasHint: e.QueueingHintFn != nil})
		}
		info.Events = &events
	}
	return info
}

func (guest) Configure(args string) wit.Result[wit.Configuration, string] {
	var r wit.Result[wit.Configuration, string]
	r.Ok.OnlyForPodsWith = []wit.PodFeature{}
	if c, ok := registered.(Configurable); ok {
		if args == "" {
			args = "{}"
		}
		if err := c.Configure(json.RawMessage(args)); err != nil {
			r.IsErr, r.Err = true, err.Error()
		}
	}
	return r
}

func (guest) SyncNodes(updated []wit.Tuple2[uint32, NodeInfo], changed []wit.NodePodsChange, removed []uint32, begin *Pod) {
	if begin != nil {
		pod = begin
	}
	for _, slot := range removed {
		if int(slot) < len(nodes) {
			nodes[slot] = nil
		}
	}
	for _, u := range updated {
		for int(u.F0) >= len(nodes) {
			nodes = append(nodes, nil)
		}
		info := u.F1
		nodes[u.F0] = &info
	}
	for _, c := range changed {
		n := node(c.Slot)
		n.Requested = c.Requested
		n.NonZeroRequested = c.NonZeroRequested
		n.PodCount = c.PodCount
		n.UsedPorts = c.UsedPorts
		if len(c.RemovedPods) > 0 {
			gone := map[string]bool{}
			for _, uid := range c.RemovedPods {
				gone[uid] = true
			}
			kept := n.Pods[:0]
			for _, p := range n.Pods {
				if !gone[p.Uid] {
					kept = append(kept, p)
				}
			}
			n.Pods = kept
		}
		n.Pods = append(n.Pods, c.AddedPods...)
	}
}

func (guest) BeginCycle(p Pod) { pod = &p }

func (guest) SortKey(p Pod) []int64 { return []int64{-int64(p.Priority)} }

func (guest) Hint(event ClusterEvent, p Pod, oldObj *Object, newObj *Object) wit.Result[QueueingHint, string] {
	var r wit.Result[QueueingHint, string]
	r.Ok = Queue
	ee, ok := registered.(EnqueueExtensions)
	if !ok {
		return r
	}
	for _, e := range ee.EventsToRegister() {
		if e.Event.Resource == event.Resource && e.Event.Actions&event.Actions != 0 && e.QueueingHintFn != nil {
			h, err := e.QueueingHintFn(&p, oldObj, newObj)
			if err != nil {
				r.IsErr, r.Err = true, err.Error()
				return r
			}
			r.Ok = h
			return r
		}
	}
	return r
}

func (guest) PreEnqueue(p Pod) wit.Status {
	if pe, ok := registered.(PreEnqueuePlugin); ok {
		return statusOf(pe.PreEnqueue(&p))
	}
	return notImplemented("PreEnqueue")
}

func (guest) PreFilter(h wit.CycleState) wit.PreFilterResult {
	pf, ok := registered.(PreFilterPlugin)
	if !ok {
		return wit.PreFilterResult{Status: notImplemented("PreFilter")}
	}
	res, st := pf.PreFilter(state(h), pod)
	out := wit.PreFilterResult{Status: statusOf(st)}
	if res != nil && res.NodeNames != nil {
		names := res.NodeNames
		out.NodeNames = &names
	}
	return out
}

func (guest) AddPod(h wit.CycleState, p Pod, slot uint32) wit.Status {
	if pf, ok := registered.(PreFilterPlugin); ok && pf.PreFilterExtensions() != nil {
		return statusOf(pf.PreFilterExtensions().AddPod(state(h), pod, &p, node(slot)))
	}
	return notImplemented("PreFilterExtensions")
}

func (guest) RemovePod(h wit.CycleState, p Pod, slot uint32) wit.Status {
	if pf, ok := registered.(PreFilterPlugin); ok && pf.PreFilterExtensions() != nil {
		return statusOf(pf.PreFilterExtensions().RemovePod(state(h), pod, &p, node(slot)))
	}
	return notImplemented("PreFilterExtensions")
}

func (guest) Filter(h wit.CycleState, slots []uint32) []wit.NodeStatus {
	out := []wit.NodeStatus{}
	f, ok := registered.(FilterPlugin)
	s := state(h)
	for _, slot := range slots {
		var st wit.Status
		if ok {
			st = statusOf(f.Filter(s, pod, node(slot)))
		} else {
			st = notImplemented("Filter")
		}
		if st.Code != Success {
			out = append(out, wit.NodeStatus{Slot: slot, Status: st})
		}
	}
	return out
}

func (guest) PostFilter(h wit.CycleState, statuses []wit.NodeStatus) wit.PostFilterResult {
	return wit.PostFilterResult{Status: notImplemented("PostFilter"), Victims: []string{}, Candidates: []wit.Candidate{}}
}

func (guest) PreScore(h wit.CycleState, slots []uint32) wit.Status {
	ps, ok := registered.(PreScorePlugin)
	if !ok {
		return notImplemented("PreScore")
	}
	infos := make([]*NodeInfo, len(slots))
	for i, slot := range slots {
		infos[i] = node(slot)
	}
	return statusOf(ps.PreScore(state(h), pod, infos))
}

func (guest) Score(h wit.CycleState, slots []uint32) wit.Result[[]int64, wit.Status] {
	var r wit.Result[[]int64, wit.Status]
	sp, ok := registered.(ScorePlugin)
	if !ok {
		r.IsErr, r.Err = true, notImplemented("Score")
		return r
	}
	s := state(h)
	r.Ok = make([]int64, len(slots))
	for i, slot := range slots {
		v, st := sp.Score(s, pod, node(slot))
		if !IsSuccess(st) {
			r.IsErr, r.Err = true, statusOf(st)
			return r
		}
		r.Ok[i] = v
	}
	lastScored = append(lastScored[:0], slots...)
	return r
}

func (guest) NormalizeScore(h wit.CycleState, scores []int64) wit.Result[[]int64, wit.Status] {
	var r wit.Result[[]int64, wit.Status]
	sp, ok := registered.(ScorePlugin)
	if !ok || sp.ScoreExtensions() == nil {
		r.IsErr, r.Err = true, notImplemented("NormalizeScore")
		return r
	}
	// The host sends the scores in the order of the Score call's slots; the
	// names come from there when this instance made it.
	list := make(NodeScoreList, len(scores))
	for i, v := range scores {
		list[i].Score = v
		if len(lastScored) == len(scores) && int(lastScored[i]) < len(nodes) && nodes[lastScored[i]] != nil {
			list[i].Name = nodes[lastScored[i]].Node.Name
		}
	}
	if st := sp.ScoreExtensions().NormalizeScore(state(h), pod, list); !IsSuccess(st) {
		r.IsErr, r.Err = true, statusOf(st)
		return r
	}
	r.Ok = make([]int64, len(list))
	for i := range list {
		r.Ok[i] = list[i].Score
	}
	return r
}

func (guest) Reserve(h wit.CycleState, nodeName string) wit.Status {
	if rp, ok := registered.(ReservePlugin); ok {
		return statusOf(rp.Reserve(state(h), pod, nodeName))
	}
	return notImplemented("Reserve")
}

func (guest) Unreserve(h wit.CycleState, nodeName string) {
	if rp, ok := registered.(ReservePlugin); ok {
		rp.Unreserve(state(h), pod, nodeName)
	}
}

func (guest) Permit(h wit.CycleState, nodeName string) wit.PermitResult {
	if pp, ok := registered.(PermitPlugin); ok {
		st, timeout := pp.Permit(state(h), pod, nodeName)
		return wit.PermitResult{Status: statusOf(st), TimeoutMs: timeout}
	}
	return wit.PermitResult{Status: notImplemented("Permit")}
}

func (guest) PreBind(h wit.CycleState, nodeName string) wit.Status {
	if pb, ok := registered.(PreBindPlugin); ok {
		return statusOf(pb.PreBind(state(h), pod, nodeName))
	}
	return notImplemented("PreBind")
}

func (guest) Bind(h wit.CycleState, nodeName string) wit.Status {
	if b, ok := registered.(BindPlugin); ok {
		return statusOf(b.Bind(state(h), pod, nodeName))
	}
	return notImplemented("Bind")
}

func (guest) PostBind(h wit.CycleState, nodeName string) {
	if pb, ok := registered.(PostBindPlugin); ok {
		pb.PostBind(state(h), pod, nodeName)
	}
}

// Implemented answers for both optional exports (sign, select-victims): the SDK
// implements neither point yet.
func (guest) Implemented() []string { return []string{} }

func (guest) SignPod(h wit.CycleState) wit.Result[[]wit.SignFragment, wit.Status] {
	return wit.Result[[]wit.SignFragment, wit.Status]{IsErr: true, Err: notImplemented("SignPod")}
}

func (guest) SelectVictimsOnNode(h wit.CycleState, slot uint32) wit.Result[wit.Victims, wit.Status] {
	return wit.Result[wit.Victims, wit.Status]{IsErr: true, Err: notImplemented("SelectVictimsOnNode")}
}
