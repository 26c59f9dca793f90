"""FewestPods: a Berth Score plugin written in Python.

Prefers the nodes that run the fewest pods, relative to how many they can take:
a node at 10 of 110 pods outranks one at 50 of 110. Spreading by pod count keeps
the blast radius of one node small for workloads of many tiny pods, which
NodeResourcesFit's LeastAllocated (CPU and memory only) does not see.

The WIT package in wit/ is the contract: componentize-py generates the Python
types from it, and this module implements the plugin world's exports as
classes named after its interfaces. Every interface is exported; `Plugin.info`
says which extension points this plugin really implements, and the host calls
only those.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import filter as filter_, permit as permit_, post_filter as post_filter_, pre_filter as pre_filter_
from wit_world.imports import types
from wit_world.imports.host import CycleState, LogLevel, log

NAME = "FewestPods"
WIT_VERSION = "0.7.1"
MAX_NODE_SCORE = 100

# The replica: node infos by slot, kept current by the host's sync-nodes calls.
_nodes: dict = {}
# The args: {"weightByCapacity": bool}; True (default) divides by the node's pod
# capacity, False counts pods only.
_by_capacity = True


def _not_implemented(point: str) -> types.Status:
    return types.Status(types.Code.ERROR, [f"{NAME} does not implement {point}"])


class Plugin(exports.Plugin):
    def info(self) -> types.PluginInfo:
        return types.PluginInfo(
            name=NAME,
            extension_points=[
                types.ExtensionPoint.SCORE,
                types.ExtensionPoint.NORMALIZE_SCORE,
            ],
            wit_version=WIT_VERSION,
            wants_pods=False,
            # Scoring rejects no pod, so no event needs to requeue one.
            events=[],
            pre_filter_extensions=False,
        )

    def configure(self, args_json: str) -> types.Configuration:
        global _by_capacity
        try:
            args = json.loads(args_json or "{}")
        except ValueError as e:
            raise Err(f"args are not JSON: {e}")
        if not isinstance(args, dict):
            raise Err("args: want an object")
        unknown = sorted(set(args) - {"apiVersion", "kind", "weightByCapacity"})
        if unknown:
            raise Err(f"unknown field `{unknown[0]}`, expected `weightByCapacity`")
        by_capacity = args.get("weightByCapacity", True)
        if not isinstance(by_capacity, bool):
            raise Err(f"weightByCapacity: want true or false, got {json.dumps(by_capacity)}")
        _by_capacity = by_capacity
        # Every pod is scored.
        return types.Configuration(only_for_pods_with=[])


class Replica(exports.Replica):
    def sync_nodes(self, updated, changed, removed, begin) -> None:
        # `begin`, the pod of a cycle that this sync begins, is not needed: FewestPods
        # scores by the nodes alone.
        for slot in removed:
            _nodes.pop(slot, None)
        for slot, info in updated:
            _nodes[slot] = info
        # Nodes whose pods changed: the sums and count (the plugin wants no pods).
        for change in changed:
            info = _nodes[change.slot]
            info.requested = change.requested
            info.non_zero_requested = change.non_zero_requested
            info.pod_count = change.pod_count
            info.used_ports = change.used_ports


class Cycle(exports.Cycle):
    def begin_cycle(self, pod: types.Pod) -> None:
        pass


class Score(exports.Score):
    def score(self, state: CycleState, slots) -> list:
        scores = []
        for slot in slots:
            info = _nodes.get(slot)
            if info is None:
                raise Err(types.Status(types.Code.ERROR, [f"{NAME}: no node in slot {slot}"]))
            capacity = info.node.allocatable.allowed_pod_number
            if _by_capacity and capacity > 0:
                # Free share of the node's pod capacity, in per mille.
                free = max(capacity - info.pod_count, 0)
                scores.append(free * 1000 // capacity)
            else:
                # Fewer pods is better: negate, NormalizeScore shifts it up.
                scores.append(-info.pod_count)
        return scores

    def normalize_score(self, state: CycleState, scores) -> list:
        if not scores:
            return []
        lo, hi = min(scores), max(scores)
        if hi == lo:
            return [MAX_NODE_SCORE for _ in scores]
        return [(s - lo) * MAX_NODE_SCORE // (hi - lo) for s in scores]


class Sign(exports.Sign):
    """SignPod (WIT 0.9.1): Score reads only the node (its pods and capacity), so
    every pod signs alike and opportunistic batching may reuse a cycle's ranking."""

    def implemented(self) -> list:
        return ["signPod"]

    def sign_pod(self, state: CycleState) -> list:
        return []


# The extension points FewestPods does not implement: the host never calls them
# (Plugin.info does not list them), but the world exports them all.
class SelectVictims(exports.SelectVictims):
    """SelectVictimsOnNode (WIT 0.9.3): FewestPods has no PostFilter, so none of it."""

    def implemented(self) -> list:
        return []

    def select_victims_on_node(self, state: CycleState, slot: int):
        raise Err(_not_implemented("SelectVictimsOnNode"))


class QueueSort(exports.QueueSort):
    def sort_key(self, pod):
        return [-pod.priority]


class EnqueueExtensions(exports.EnqueueExtensions):
    def hint(self, event, pod, old, new):
        return types.QueueingHint.QUEUE


class PreEnqueue(exports.PreEnqueue):
    def pre_enqueue(self, pod):
        return _not_implemented("PreEnqueue")


class PreFilter(exports.PreFilter):
    def pre_filter(self, state):
        return pre_filter_.PreFilterResult(_not_implemented("PreFilter"), None)


class PreFilterExtensions(exports.PreFilterExtensions):
    def add_pod(self, state, pod, slot):
        return _not_implemented("PreFilterExtensions")

    def remove_pod(self, state, pod, slot):
        return _not_implemented("PreFilterExtensions")


class Filter(exports.Filter):
    def filter(self, state, slots):
        return [filter_.NodeStatus(slot, _not_implemented("Filter")) for slot in slots]


class PostFilter(exports.PostFilter):
    def post_filter(self, state, statuses):
        return post_filter_.PostFilterResult(_not_implemented("PostFilter"), None, [], [])


class PreScore(exports.PreScore):
    def pre_score(self, state, slots):
        return _not_implemented("PreScore")


class Reserve(exports.Reserve):
    def reserve(self, state, node):
        return _not_implemented("Reserve")

    def unreserve(self, state, node):
        log(LogLevel.WARN, f"{NAME}: unreserve called but not implemented")


class Permit(exports.Permit):
    def permit(self, state, node):
        return permit_.PermitResult(_not_implemented("Permit"), 0)


class PreBind(exports.PreBind):
    def pre_bind(self, state, node):
        return _not_implemented("PreBind")


class Bind(exports.Bind):
    def bind(self, state, node):
        return _not_implemented("Bind")


class PostBind(exports.PostBind):
    def post_bind(self, state, node):
        log(LogLevel.WARN, f"{NAME}: post-bind called but not implemented")
