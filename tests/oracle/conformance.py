#!/usr/bin/env python3
"""Run the conformance tables (tests/conformance/*.yaml) through berth-oracle.

    conformance.py [--oracle BIN] [TABLE.yaml...]   (default: every table)

Each case becomes a cluster file (its namespaces, storage and dra objects, nodes,
existing pods and the incoming pod) and a KubeSchedulerConfiguration whose one
profile has only the table's plugin (with the case's args) besides PrioritySort and
DefaultBinder, as the conformance test builds it. The oracle's answer is checked
against the case's `expect`: the plugin's PreFilter code, its Filter code and reasons
per node, and its normalized score per node (the nodes `score` lists are scored, in
its order, feasible or not: the oracle's score_nodes). A case whose incoming pod
names its node (spec.nodeName) is skipped: in a cluster file that pod is bound, not
pending. Prints one line per mismatch; exit status 1 when there are any. Needs
PyYAML.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

import yaml

here = os.path.dirname(os.path.abspath(__file__))
tables = os.path.join(here, "..", "conformance")


def manifest(obj, kind, api_version="v1"):
    obj = dict(obj)
    obj.setdefault("apiVersion", api_version)
    obj.setdefault("kind", kind)
    return obj


def case_request(plugin, case):
    docs = []
    for ns in case.get("namespaces") or []:
        docs.append({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": ns["name"], "labels": ns.get("labels") or {}}})
    docs += case.get("storage") or []
    docs += case.get("dra") or []
    docs += [manifest(n, "Node") for n in case["nodes"]]
    docs += [manifest(p, "Pod") for p in case.get("pods") or []]
    docs.append(manifest(case["pod"], "Pod"))
    profile = {
        "schedulerName": "default-scheduler",
        "plugins": {"multiPoint": {
            "enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"}, {"name": plugin}],
            "disabled": [{"name": "*"}],
        }},
    }
    if case.get("args") is not None:
        profile["pluginConfig"] = [{"name": plugin, "args": case["args"]}]
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [profile]}
    meta = case["pod"]["metadata"]
    score = case["expect"].get("score")
    return {
        **({"score_nodes": list(score)} if score else {}),
        "yaml": yaml.safe_dump_all(docs),
        "config_yaml": yaml.safe_dump(config),
        "pod": f"{meta.get('namespace') or 'default'}/{meta['name']}",
    }


def check(plugin, case, answer):
    if "error" in answer:
        return [f"oracle error: {answer['error']}"]
    out = []
    expect = case["expect"]
    pre = {p["plugin"]: p for p in answer["prefilter"]}
    if "preFilter" in expect:
        got = pre.get(plugin, {}).get("code", "(no PreFilter)")
        if got != expect["preFilter"]:
            out.append(f"preFilter: expected {expect['preFilter']}, oracle {got} {pre.get(plugin, {}).get('reasons')}")
    nodes = {n["node"]: n for n in answer["nodes"]}
    for node, code in (expect.get("filter") or {}).items():
        n = nodes.get(node)
        if n is None:
            out.append(f"filter {node}: no such node in the answer")
            continue
        entry = next((f for f in n["filters"] if f["plugin"] == plugin), None)
        got = entry["code"] if entry else "Success"
        if got != code:
            out.append(f"filter {node}: expected {code}, oracle {got} {entry and entry['reasons']}")
    for node, reasons in (expect.get("reasons") or {}).items():
        n = nodes.get(node)
        entry = n and next((f for f in n["filters"] if f["plugin"] == plugin), None)
        got = entry["reasons"] if entry else []
        if got != reasons:
            out.append(f"reasons {node}: expected {reasons}, oracle {got}")
    for node, score in (expect.get("score") or {}).items():
        n = nodes.get(node)
        entry = n and next((s for s in n["scores"] if s["plugin"] == plugin), None)
        if entry is None:
            out.append(f"score {node}: expected {score}, oracle: not scored (feasible: {n and n['feasible']})")
        elif entry["normalized"] != score:
            out.append(f"score {node}: expected {score}, oracle {entry['normalized']} (raw {entry['raw']})")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle", default=os.environ.get("BERTH_ORACLE_BIN"))
    ap.add_argument("tables", nargs="*")
    a = ap.parse_args()
    oracle = a.oracle or subprocess.run([os.path.join(here, "build.sh")], capture_output=True,
                                        text=True, check=True).stdout.strip()
    files = a.tables or sorted(glob.glob(os.path.join(tables, "*.yaml")))
    cases = []
    for f in files:
        t = yaml.safe_load(open(f))
        for c in t["cases"]:
            cases.append((os.path.basename(f), t["plugin"], c))
    reqs = "".join(json.dumps(case_request(p, c)) + "\n" for _, p, c in cases)
    proc = subprocess.run([oracle, "serve"], input=reqs, capture_output=True, text=True)
    answers = [json.loads(l) for l in proc.stdout.splitlines()]
    if len(answers) != len(cases):
        print(f"oracle answered {len(answers)} of {len(cases)} requests:\n{proc.stderr}")
        return 1
    failed = skipped = 0
    for (f, p, c), ans in zip(cases, answers):
        if (c["pod"].get("spec") or {}).get("nodeName"):
            skipped += 1
            continue
        problems = check(p, c, ans)
        if problems:
            failed += 1
            differs = " (the case notes Berth differs)" if c.get("differs") else ""
            print(f"{f}: {c['name']}{differs}")
            for pr in problems:
                print(f"    {pr}")
    print(f"{len(cases) - failed - skipped}/{len(cases) - skipped} cases agree with the oracle "
          f"({skipped} skipped: the incoming pod names its node)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
