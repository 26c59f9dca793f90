#!/usr/bin/env bash
# `berth bench --api` beside upstream kube-scheduler of the same Kubernetes release as
# the API server (1.37.2, built from Go modules by apiserver.sh), each on a fresh API
# server on loopback, same workload, one run each.
#
#   tests/e2e/bench-api.sh [NODES [INIT_PODS [MEASURED_PODS]]]     (default 5000 1000 1000)
#
# Both schedulers run as their own process with the client limit raised
# (qps = burst = 5000), so the client's rate limit is not what is measured. Prints one
# JSON line per scheduler (berth bench's --output json), then one for the API server's
# own ceiling: no scheduler, the bench binding each pod itself (`--bind-only`).
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=${1:-5000} init=${2:-1000} measure=${3:-1000}
script=tests/e2e/apiserver.sh

ks_bin=$(bash $script build-scheduler)
bash $script build >/dev/null
cargo build --release -q
berth=$PWD/target/release/berth

one() { # one NAME
  local dir
  dir=$(mktemp -d /tmp/berth-bench-api.XXXXXX)
  trap 'bash '"$script"' stop '"$dir"'; rm -rf '"$dir" RETURN
  bash $script start "$dir" >/dev/null
  local cmd=()
  case $1 in
    berth)
      cat > "$dir/berth.yaml" <<EOF
apiVersion: berth.dev/v1alpha1
kind: BerthConfiguration
clientConnection: {kubeconfig: $dir/kubeconfig, qps: 5000, burst: 5000}
EOF
      cmd=(--scheduler-command "$berth run --config $dir/berth.yaml")
      ;;
    kube-scheduler)
      cat > "$dir/kube-scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: $dir/kubeconfig, qps: 5000, burst: 5000}
leaderElection: {leaderElect: false}
EOF
      cmd=(--scheduler-command "$ks_bin/kube-scheduler --config $dir/kube-scheduler.yaml --secure-port=0")
      ;;
    bind-only)
      # No scheduler: the bench binds the pods itself (Berth's binder and events).
      cmd=(--bind-only)
      ;;
  esac
  "$berth" bench --api --kubeconfig "$dir/kubeconfig" --nodes "$nodes" --init-pods "$init" \
    --measure-pods "$measure" "${cmd[@]}" --output json
}

one berth
one kube-scheduler
one bind-only
