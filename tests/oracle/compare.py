#!/usr/bin/env python3
"""Compare `berth explain --output json` with berth-oracle's answer for the same pod.

    compare.py [--berth BIN] [--oracle BIN] [--config F] [--feature-gates G] [--fill-pods] --pod NS/NAME FILE...

Nodes are matched by name (the two may list them in different orders: the oracle in
kube-scheduler's node-tree order), plugins by name within a node. Prints one line per
difference; exit status 1 when there are any. BIN defaults: $BERTH_BIN or `berth` on
PATH, $BERTH_ORACLE_BIN or the build of ./build.sh.

--fill-pods gives both programs copies of the files in which every Node without
status.allocatable.pods has 110 (what Berth assumes for such a node; upstream counts
0, and every pod is then "Too many pods").
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return json.loads(p.stdout), None


def by(items, key):
    return {i[key]: i for i in items}


def diff_statuses(where, a, b, out):
    am, bm = by(a, "plugin"), by(b, "plugin")
    order_a = [x["plugin"] for x in a]
    order_b = [x["plugin"] for x in b]
    for name in sorted(set(am) | set(bm)):
        x, y = am.get(name), bm.get(name)
        if x is None or y is None:
            out.append(f"{where} {name}: berth {x and (x['code'], x['reasons'])} / oracle {y and (y['code'], y['reasons'])}")
        elif (x["code"], x["reasons"]) != (y["code"], y["reasons"]):
            out.append(f"{where} {name}: berth {x['code']} {x['reasons']} / oracle {y['code']} {y['reasons']}")
    if set(order_a) == set(order_b) and order_a != order_b:
        out.append(f"{where} order: berth {order_a} / oracle {order_b}")


def compare(b, o):
    out = []
    diff_statuses("prefilter", b["prefilter"], o["prefilter"], out)
    bn, on = by(b["nodes"], "node"), by(o["nodes"], "node")
    if [n["node"] for n in b["nodes"]] != [n["node"] for n in o["nodes"]]:
        out.append(f"node order: berth {[n['node'] for n in b['nodes']]} / oracle {[n['node'] for n in o['nodes']]}")
    for name in sorted(set(bn) | set(on)):
        x, y = bn.get(name), on.get(name)
        if x is None or y is None:
            out.append(f"node {name}: only in {'oracle' if x is None else 'berth'}")
            continue
        if x["feasible"] != y["feasible"]:
            out.append(f"node {name} feasible: berth {x['feasible']} / oracle {y['feasible']}")
        diff_statuses(f"node {name} filter", x["filters"], y["filters"], out)
        xs, ys = by(x["scores"], "plugin"), by(y["scores"], "plugin")
        for p in sorted(set(xs) | set(ys)):
            s, t = xs.get(p), ys.get(p)
            key = lambda e: e and (e["raw"], e["normalized"], e["weighted"])
            if key(s) != key(t):
                out.append(f"node {name} score {p}: berth {key(s)} / oracle {key(t)}")
        if x["total"] != y["total"]:
            out.append(f"node {name} total: berth {x['total']} / oracle {y['total']}")
    bp, op = b.get("post_filter"), o.get("post_filter")
    if (bp is None) != (op is None):
        out.append(f"post_filter: berth {bp and bp['status']} / oracle {op and op['status']}")
    elif bp is not None:
        if bp["plugin"] != op["plugin"]:
            out.append(f"post_filter plugin: berth {bp['plugin']} / oracle {op['plugin']}")
        if bp["status"]["code"] != op["status"]["code"] or bp["status"]["reasons"] != op["status"]["reasons"]:
            out.append(f"post_filter status: berth {bp['status']['code']} {bp['status']['reasons']} / oracle {op['status']['code']} {op['status']['reasons']}")
        if bp.get("nominated_node") != op.get("nominated_node"):
            out.append(f"post_filter nominated_node: berth {bp.get('nominated_node')} / oracle {op.get('nominated_node')}")
    if "message" in o:
        out.append(f"(oracle's FailedScheduling message: {o['message']})")
    return out


def fill_pods(files, tmp):
    import yaml  # only for --fill-pods

    out = []
    for i, f in enumerate(files):
        docs = list(yaml.safe_load_all(open(f)))

        def fill(d):
            if isinstance(d, dict) and d.get("kind") == "Node":
                alloc = d.setdefault("status", {}).setdefault("allocatable", {})
                alloc.setdefault("pods", "110")
            elif isinstance(d, dict) and d.get("kind", "").endswith("List"):
                for item in d.get("items") or []:
                    fill(item)

        for d in docs:
            fill(d)
        path = os.path.join(tmp, f"{i}-{os.path.basename(f)}")
        with open(path, "w") as w:
            yaml.safe_dump_all(docs, w)
        out.append(path)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--berth", default=os.environ.get("BERTH_BIN") or shutil.which("berth"))
    ap.add_argument("--oracle", default=os.environ.get("BERTH_ORACLE_BIN"))
    ap.add_argument("--pod", required=True)
    ap.add_argument("--config")
    ap.add_argument("--feature-gates")
    ap.add_argument("--fill-pods", action="store_true")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    if a.fill_pods:
        a.files = fill_pods(a.files, tempfile.mkdtemp(prefix="compare-"))
    oracle = a.oracle or subprocess.run([os.path.join(here, "build.sh")], capture_output=True,
                                        text=True, check=True).stdout.strip()
    extra = []
    if a.feature_gates:
        extra += ["--feature-gates", a.feature_gates]
    b_extra = list(extra)
    o_extra = list(extra)
    if a.config:
        b_extra += ["--config", a.config]
        o_extra += ["--config", a.config]
    b, berr = run([a.berth, "explain", "--pod", a.pod, "--output", "json", *b_extra, *a.files])
    o, oerr = run([oracle, "explain", "--pod", a.pod, *o_extra, *a.files])
    if berr or oerr:
        print(f"berth: {berr or 'ok'}\noracle: {oerr or 'ok'}")
        return 1
    diffs = compare(b, o)
    for d in diffs:
        print(d)
    return 1 if any(not d.startswith("(") for d in diffs) else 0


if __name__ == "__main__":
    sys.exit(main())
