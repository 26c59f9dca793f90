#!/usr/bin/env bash
# A real kube-apiserver and etcd on loopback, for Berth's end-to-end tests.
#
#   apiserver.sh build                 build (once) kube-apiserver, kube-controller-manager,
#                                      kube-scheduler, etcd and featuregates (kube-scheduler's
#                                      gates) from Go modules (./controlplane) into the
#                                      cache; print the bin directory
#   apiserver.sh build-scheduler, build-controller-manager
#                                      the same as build (kept for their callers)
#   apiserver.sh start DIR [--rbac] [--runtime-config=GROUP/VERSION=BOOL,...]
#                                      start etcd and kube-apiserver on free loopback ports;
#                                      DIR gets the certificates, tokens, logs, a kubeconfig
#                                      (DIR/kubeconfig) and DIR/env (ports and pids). With
#                                      --rbac, authorization is Node,RBAC (else AlwaysAllow).
#                                      --runtime-config turns API versions on or off beyond
#                                      the default (which adds scheduling.k8s.io/v1beta1),
#                                      for a server that serves less.
#                                      Static tokens (DIR/tokens.csv, all modes):
#                                        berth-admin-token    admin, system:masters
#                                        berth-sa-token       Berth's ServiceAccount
#                                        berth-nobody-token   berth-e2e-nobody, no roles
#                                        berth-monitor-token  berth-e2e-monitor, no roles
#                                                             (tests bind it as they need)
#   apiserver.sh start-controller-manager DIR [CONTROLLERS]
#                                      start kube-controller-manager against DIR's API
#                                      server, running only CONTROLLERS (its --controllers;
#                                      default: the PersistentVolume binder, the
#                                      ResourceClaim controller, the ephemeral volume
#                                      controller and the garbage collector), as admin;
#                                      log: DIR/controller-manager.log
#   apiserver.sh stop DIR              stop them all
#   apiserver.sh kill-apiserver DIR    kill -9 the API server only (fault tests)
#   apiserver.sh start-apiserver DIR   start it again on the same port, same etcd
#
# The control plane is Kubernetes 1.37.2, built with Go (1.26 or newer on PATH) from the
# module in ./controlplane: k8s.io/kubernetes v1.37.2 with its staging modules at
# v0.37.2, and etcd at the version Kubernetes requires. The API server serves
# resource.k8s.io/v1 (DRA) and, with GenericWorkload on, scheduling.k8s.io/v1beta1
# (Workload, PodGroup). Binaries are cached in $BERTH_E2E_CACHE (default
# $XDG_CACHE_HOME/berth-e2e, else ~/.cache/berth-e2e), one directory per version and
# module contents; the module cache is Go's own. $BERTH_E2E_BIN may name a directory
# that already holds kube-apiserver, etcd, kube-controller-manager, kube-scheduler and
# featuregates; then nothing is built.
set -euo pipefail

cache="${BERTH_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/berth-e2e}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module="$here/controlplane"
k8s_version=1.37.2
# The module's files decide what is built: a change to any of them is a new build.
build_id="$k8s_version-$(cd "$module" && find . -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12)"

log() { echo "apiserver.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

# Go as k8s.io/kubernetes v1.37.2 asks (go.mod: go 1.26.0); Debian 12's golang-go (1.19)
# is too old, and the build never switches toolchains behind the caller's back.
go_ready() {
  command -v go >/dev/null \
    || die "go not found: building the control plane needs Go 1.26 or newer on PATH (or set BERTH_E2E_BIN)"
  local v
  v=$(GOTOOLCHAIN=local go env GOVERSION)
  case "$v" in
    go1.2[6-9]*|go1.[3-9][0-9]*|go[2-9]*) ;;
    *) die "$(command -v go) is $v: building Kubernetes $k8s_version needs Go 1.26 or newer (or set BERTH_E2E_BIN)" ;;
  esac
}

# go_build NAME PACKAGE...: build the packages (main packages, named by import path or
# ./etcd) into the cache's bin directory at once, sharing what they have in common.
go_build() {
  local bin="$cache/$build_id/bin" names="$1"; shift
  go_ready
  log "building $names $k8s_version from Go modules (minutes, once; modules from the Go proxy)"
  local ldflags="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $pkg.gitVersion=v$k8s_version -X $pkg.gitMajor=${k8s_version%%.*}"
    ldflags="$ldflags -X $pkg.gitMinor=$(echo "$k8s_version" | cut -d. -f2) -X $pkg.gitTreeState=clean"
  done
  # Built aside and moved in whole, so that a build interrupted or run twice at once
  # never leaves a partial program where build_cmd looks.
  mkdir -p "$bin"
  local out
  out=$(mktemp -d "$bin.XXXXXX")
  (cd "$module" && GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
    go build -trimpath -ldflags "$ldflags" -o "$out/" "$@" >&2) \
    || { rm -rf "$out"; die "go build of $names failed (module: $module)"; }
  local f
  for f in "$out"/*; do mv -f "$f" "$bin/"; done
  rmdir "$out"
}

# build_cmd NAME: the directory holding the program NAME (kube-apiserver,
# kube-controller-manager, kube-scheduler, etcd or featuregates), built into the cache
# when missing, all together in one go build (featuregates prints kube-scheduler's
# feature gates; the tests race kube-scheduler against Berth on the same objects).
build_cmd() {
  local name=$1 bin="$cache/$build_id/bin"
  if [ -n "${BERTH_E2E_BIN:-}" ]; then
    [ -x "$BERTH_E2E_BIN/$name" ] || die "BERTH_E2E_BIN=$BERTH_E2E_BIN has no executable $name"
    echo "$BERTH_E2E_BIN"
    return
  fi
  if [ ! -x "$bin/$name" ]; then
    go_build "kube-apiserver, kube-controller-manager, kube-scheduler, etcd and featuregates" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler ./etcd ./featuregates
    [ -x "$bin/$name" ] || die "the build made no $bin/$name"
  fi
  echo "$bin"
}

etcd_bin() {
  echo "$(build_cmd etcd)/etcd"
}

# free_ports N: N distinct loopback ports nobody listens on, below the kernel's
# ephemeral range. A port the kernel hands out (bind to 0) is free again once the
# probe closes, and an outgoing connection could take it before the server binds it.
free_ports() {
  python3 - "$1" <<'PY'
import random, socket, sys
try:
    high = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    high = 32768
candidates = list(range(10000, max(high, 10001)))
random.shuffle(candidates)
found = []
for port in candidates:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    found.append(port)
    if len(found) == int(sys.argv[1]):
        break
print(" ".join(map(str, found)))
PY
}

# wait_for_pid SECONDS PID COMMAND...: until COMMAND succeeds; gives up early when the
# process PID (the one being waited for) has exited.
wait_for_pid() {
  local deadline=$((SECONDS + $1)) pid=$2; shift 2
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || return 1
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

make_certs() {
  local d=$1
  [ -f "$d/ca.crt" ] && return
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=berth-e2e-ca" \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$d/san.ext"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 30 -extfile "$d/san.ext" -out "$d/server.crt" 2>/dev/null
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
  openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
  # Static tokens: an admin (system:masters) and, for RBAC tests, Berth's ServiceAccount.
  printf 'berth-admin-token,admin,admin-uid,"system:masters"\n' > "$d/tokens.csv"
  printf 'berth-sa-token,system:serviceaccount:kube-system:berth,berth-sa-uid,"system:serviceaccounts,system:serviceaccounts:kube-system,system:authenticated"\n' >> "$d/tokens.csv"
  # Users of the endpoint tests: neither is bound to any role by the script.
  printf 'berth-nobody-token,berth-e2e-nobody,berth-nobody-uid\n' >> "$d/tokens.csv"
  printf 'berth-monitor-token,berth-e2e-monitor,berth-monitor-uid\n' >> "$d/tokens.csv"
}

write_kubeconfig() { # write_kubeconfig DIR PORT TOKEN FILE
  cat > "$4" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:$2
    certificate-authority: $1/ca.crt
users:
- name: e2e
  user:
    token: $3
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e}
current-context: e2e
EOF
}

# The API server's gates beyond its defaults: GenericWorkload serves Workload and
# PodGroup; the two alpha gates let pods carry the fields from which kube-scheduler
# infers a declared feature (hostNetwork with hostUsers: false is refused without
# UserNamespacesHostNetworkSupport, and bindMountOptions dropped without
# VolumeBindMountOptions).
apiserver_gates=GenericWorkload=true,UserNamespacesHostNetworkSupport=true,VolumeBindMountOptions=true

start_apiserver() {
  local d=$1
  # shellcheck disable=SC1091
  . "$d/env"
  local bin
  bin=$(build_cmd kube-apiserver)
  log "starting kube-apiserver ($("$bin/kube-apiserver" --version)) on port $APISERVER_PORT"
  "$bin/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
    --secure-port="$APISERVER_PORT" \
    --tls-cert-file="$d/server.crt" --tls-private-key-file="$d/server.key" \
    --client-ca-file="$d/ca.crt" \
    --token-auth-file="$d/tokens.csv" \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$d/sa.pub" \
    --service-account-signing-key-file="$d/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode="$AUTHZ" \
    --endpoint-reconciler-type=none \
    --feature-gates="$apiserver_gates" \
    --runtime-config="$RUNTIME_CONFIG" \
    --disable-admission-plugins=TaintNodesByCondition,ServiceAccount \
    --max-requests-inflight=2000 --max-mutating-requests-inflight=1000 \
    --cert-dir="$d/certs" \
    >> "$d/apiserver.log" 2>&1 &
  local pid=$!
  echo "$pid" > "$d/apiserver.pid"
  if ! wait_for_pid 120 "$pid" \
      curl -sf --cacert "$d/ca.crt" -H "Authorization: Bearer berth-admin-token" \
      "https://127.0.0.1:$APISERVER_PORT/readyz"; then
    tail -30 "$d/apiserver.log" >&2
    kill -0 "$pid" 2>/dev/null || die "kube-apiserver exited (log: $d/apiserver.log)"
    die "kube-apiserver did not become ready within 120 s (log: $d/apiserver.log)"
  fi
}

# Only the controllers asked for, with the admin's token (no per-controller service
# accounts), no leader election and no serving port.
default_controllers=persistentvolume-binder-controller,resourceclaim-controller,ephemeral-volume-controller,garbage-collector-controller
cmd_start_controller_manager() {
  local d=${1:?usage: apiserver.sh start-controller-manager DIR [CONTROLLERS]}
  local controllers=${2:-$default_controllers}
  [ -d "$d" ] || die "$d: no such directory"
  d=$(cd "$d" && pwd)
  [ -f "$d/kubeconfig" ] || die "$d/kubeconfig missing: start the API server first (apiserver.sh start $d)"
  if [ -f "$d/controller-manager.pid" ] && kill -0 "$(cat "$d/controller-manager.pid")" 2>/dev/null; then
    die "kube-controller-manager already runs for $d (pid $(cat "$d/controller-manager.pid"))"
  fi
  local bin log=$d/controller-manager.log from
  bin=$(build_cmd kube-controller-manager)
  # The log is appended to: only what this run writes counts.
  from=0
  [ -f "$log" ] && from=$(wc -l < "$log")
  "$bin/kube-controller-manager" \
    --kubeconfig="$d/kubeconfig" \
    --controllers="$controllers" \
    --feature-gates=GenericWorkload=true \
    --use-service-account-credentials=false \
    --leader-elect=false \
    --secure-port=0 \
    >> "$log" 2>&1 &
  local pid=$! deadline=$((SECONDS + 60))
  echo "$pid" > "$d/controller-manager.pid"
  # Ready once every controller asked for has started and every informer it waits for
  # has synced: each logs "Waiting for caches to sync" when it starts waiting and
  # "Caches are synced" when done (without naming itself in the text log), so all the
  # controllers' start messages must be there and the two counts equal.
  local starts=() c
  for c in ${controllers//,/ }; do
    case "$c" in
      persistentvolume-binder-controller) starts+=("Starting persistent volume controller") ;;
      resourceclaim-controller) starts+=("Starting resource claim controller") ;;
      ephemeral-volume-controller) starts+=("Starting ephemeral volume controller") ;;
      garbage-collector-controller) starts+=("Garbage collector: all resource monitors have synced") ;;
      *) die "start-controller-manager: $c: not a controller this script knows how to wait for" ;;
    esac
  done
  until tail -n "+$((from + 1))" "$log" | awk -v want="$(printf '%s\n' "${starts[@]}")" '
      BEGIN { n = split(want, w, "\n"); for (i = 1; i <= n; i++) if (w[i] != "") need[w[i]] = 1 }
      /"Waiting for caches to sync"/ { waiting++ }
      /"Caches are synced"/ { synced++ }
      { for (m in need) if (index($0, m)) delete need[m] }
      END { left = 0; for (m in need) left++; exit !(left == 0 && waiting > 0 && synced >= waiting) }'; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n "+$((from + 1))" "$log" | tail -30 >&2
      rm -f "$d/controller-manager.pid"
      die "kube-controller-manager exited (log: $log)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n "+$((from + 1))" "$log" | grep -v "is disabled" | tail -30 >&2
      die "kube-controller-manager's controllers ($controllers) did not sync within 60 s (log: $log)"
    fi
    sleep 0.2
  done
}

cmd_start() {
  local d=${1:?usage: apiserver.sh start DIR [--rbac] [--runtime-config=...]} authz=AlwaysAllow
  local runtime_config=scheduling.k8s.io/v1beta1=true arg
  shift
  for arg in "$@"; do
    case "$arg" in
      --rbac) authz=Node,RBAC ;;
      --runtime-config=*) runtime_config="$runtime_config,${arg#--runtime-config=}" ;;
      *) die "start: unknown argument $arg (expected --rbac or --runtime-config=GROUP/VERSION=BOOL,...)" ;;
    esac
  done
  mkdir -p "$d" && d=$(cd "$d" && pwd)
  build_cmd kube-apiserver >/dev/null
  local etcd
  etcd=$(etcd_bin)
  make_certs "$d"
  local etcd_port peer_port api_port
  read -r etcd_port peer_port api_port <<< "$(free_ports 3)"
  [ -n "$api_port" ] || die "no free loopback ports"
  cat > "$d/env" <<EOF
ETCD_PORT=$etcd_port
APISERVER_PORT=$api_port
AUTHZ=$authz
RUNTIME_CONFIG=$runtime_config
EOF
  "$etcd" --data-dir="$d/etcd" --name=berth-e2e \
    --listen-client-urls="http://127.0.0.1:$etcd_port" \
    --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-cluster="berth-e2e=http://127.0.0.1:$peer_port" \
    --unsafe-no-fsync \
    > "$d/etcd.log" 2>&1 &
  echo $! > "$d/etcd.pid"
  wait_for_pid 30 "$(cat "$d/etcd.pid")" curl -sf "http://127.0.0.1:$etcd_port/health" \
    || { tail -20 "$d/etcd.log" >&2; die "etcd did not start (log: $d/etcd.log)"; }
  start_apiserver "$d"
  write_kubeconfig "$d" "$api_port" berth-admin-token "$d/kubeconfig"
  write_kubeconfig "$d" "$api_port" berth-sa-token "$d/kubeconfig-sa"
  echo "APISERVER=https://127.0.0.1:$api_port"
  echo "KUBECONFIG=$d/kubeconfig"
}

stop_pid() { # stop_pid PIDFILE SIGNAL
  [ -f "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  kill "-$2" "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$1"
}

case "${1:-}" in
  build|build-controller-manager|build-scheduler)
    build_cmd kube-scheduler >/dev/null
    bin=$(build_cmd kube-apiserver)
    log "$("$bin/kube-apiserver" --version), etcd $("$bin/etcd" --version | sed -n 's/^etcd Version: //p') in $bin"
    echo "$bin"
    ;;
  start) shift; cmd_start "$@" ;;
  start-controller-manager) cmd_start_controller_manager "${2:-}" "${3:-}" ;;
  stop)
    # A test's control plane and its data are thrown away: killed at once rather than
    # shut down gracefully (kube-apiserver and etcd take some 5 s together to drain,
    # some 2.5 minutes over the end-to-end tier's servers).
    d=${2:?usage: apiserver.sh stop DIR}
    stop_pid "$d/controller-manager.pid" KILL
    stop_pid "$d/apiserver.pid" KILL
    stop_pid "$d/etcd.pid" KILL
    ;;
  kill-apiserver) stop_pid "${2:?DIR}/apiserver.pid" KILL ;;
  start-apiserver) start_apiserver "${2:?DIR}" ;;
  *) echo "usage: apiserver.sh build|build-scheduler|build-controller-manager|start DIR [--rbac] [--runtime-config=...]|start-controller-manager DIR [CONTROLLERS]|stop DIR|kill-apiserver DIR|start-apiserver DIR" >&2; exit 2 ;;
esac
