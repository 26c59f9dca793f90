#!/usr/bin/env bash
# A real kube-apiserver and etcd on loopback, for Berth's end-to-end tests.
#
#   apiserver.sh build                 build (once) kube-apiserver from Debian's source
#                                      package into the cache; print the bin directory
#   apiserver.sh build-scheduler       the same for kube-scheduler (for `berth bench --api`)
#   apiserver.sh build-controller-manager
#                                      the same for kube-controller-manager (the
#                                      PersistentVolume controller of the volume tests)
#   apiserver.sh start DIR [--rbac]    start etcd and kube-apiserver on free loopback ports;
#                                      DIR gets the certificates, tokens, logs, a kubeconfig
#                                      (DIR/kubeconfig) and DIR/env (ports and pids). With
#                                      --rbac, authorization is Node,RBAC (else AlwaysAllow).
#                                      Static tokens (DIR/tokens.csv, all modes):
#                                        berth-admin-token    admin, system:masters
#                                        berth-sa-token       Berth's ServiceAccount
#                                        berth-nobody-token   berth-e2e-nobody, no roles
#                                        berth-monitor-token  berth-e2e-monitor, no roles
#                                                             (tests bind it as they need)
#   apiserver.sh start-controller-manager DIR
#                                      start kube-controller-manager against DIR's API
#                                      server, running only the PersistentVolume binder
#                                      (as admin; log: DIR/controller-manager.log)
#   apiserver.sh stop DIR              stop them all
#   apiserver.sh kill-apiserver DIR    kill -9 the API server only (fault tests)
#   apiserver.sh start-apiserver DIR   start it again on the same port, same etcd
#
# Binaries are cached in $BERTH_E2E_CACHE (default $XDG_CACHE_HOME/berth-e2e, else
# ~/.cache/berth-e2e). $BERTH_E2E_BIN may name a directory that already holds
# kube-apiserver (and etcd, kube-controller-manager); then nothing is built. Building needs root for apt-get
# (Debian 12: golang-go, etcd-server, rsync and the kubernetes source package, 1.20.2).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

cache="${BERTH_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/berth-e2e}"
k8s_version=1.20.2
# Kubernetes 1.20 vendors reflect2 1.0.1, whose map iteration crashes the API server
# (SIGSEGV while encoding any object with a map) when built with Go >= 1.18, as
# Debian 12's Go is; the tree is built with Debian's reflect2 1.0.2 instead.
build_id="$k8s_version-reflect2-1.0.2"

log() { echo "apiserver.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

apt_ready() {
  [ -f "$cache/.apt-ready-$build_id" ] && return 0
  command -v apt-get >/dev/null || die "apt-get not found: set BERTH_E2E_BIN to a directory with kube-apiserver and etcd"
  [ "$(id -u)" = 0 ] || die "building kube-apiserver needs root for apt-get (or set BERTH_E2E_BIN)"
  if [ ! -f /etc/apt/sources.list.d/berth-deb-src.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      > /etc/apt/sources.list.d/berth-deb-src.sources
  fi
  apt_install apiserver.sh golang-go etcd-server rsync dpkg-dev golang-github-modern-go-reflect2-dev \
    || die "could not install the packages kube-apiserver is built with"
  mkdir -p "$cache"
  touch "$cache/.apt-ready-$build_id"
}

# Unpack Debian's kubernetes source package once; print the tree.
source_tree() {
  local src="$cache/src"
  if [ ! -f "$src/.unpacked-$build_id" ]; then
    apt_ready
    rm -rf "$src" && mkdir -p "$src"
    log "apt-get source kubernetes"
    (cd "$src" && apt-get source --download-only kubernetes >&2)
    local dsc
    dsc=$(ls "$src"/kubernetes_*.dsc | head -1)
    (cd "$src" && dpkg-source --no-check -x "$dsc" tree >&2)
    mkdir -p "$src/tree/.go/src/k8s.io"
    ln -sfn ../../.. "$src/tree/.go/src/k8s.io/kubernetes"
    local reflect2=/usr/share/gocode/src/github.com/modern-go/reflect2
    [ -f "$reflect2/reflect2.go" ] || die "$reflect2 missing (package golang-github-modern-go-reflect2-dev)"
    rm -rf "$src/tree/vendor/github.com/modern-go/reflect2"
    cp -r "$reflect2" "$src/tree/vendor/github.com/modern-go/reflect2"
    touch "$src/.unpacked-$build_id"
  fi
  echo "$src/tree"
}

# build_cmd NAME: make WHAT=cmd/NAME in the source tree, copy the binary to the cache.
build_cmd() {
  local name=$1 bin="$cache/$build_id/bin"
  if [ -n "${BERTH_E2E_BIN:-}" ]; then
    [ -x "$BERTH_E2E_BIN/$name" ] || die "BERTH_E2E_BIN=$BERTH_E2E_BIN has no executable $name"
    echo "$BERTH_E2E_BIN"
    return
  fi
  if [ ! -x "$bin/$name" ]; then
    local tree
    tree=$(source_tree)
    log "building $name $k8s_version (a few minutes, once)"
    (cd "$tree" && GOPATH="$tree/.go" GOFLAGS=-mod=vendor CGO_ENABLED=0 GO111MODULE=off \
      make WHAT="cmd/$name" >&2) || die "make WHAT=cmd/$name failed"
    mkdir -p "$bin"
    cp "$(find "$tree/_output" -type f -name "$name" -perm -u+x | head -1)" "$bin/$name.tmp"
    mv "$bin/$name.tmp" "$bin/$name"
  fi
  echo "$bin"
}

etcd_bin() {
  if [ -n "${BERTH_E2E_BIN:-}" ] && [ -x "$BERTH_E2E_BIN/etcd" ]; then echo "$BERTH_E2E_BIN/etcd"; return; fi
  command -v etcd >/dev/null || apt_ready
  command -v etcd || die "etcd not found after installing etcd-server"
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

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
  local deadline=$((SECONDS + $1)) what=$2; shift 2
  until "$@" >/dev/null 2>&1; do
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

start_apiserver() {
  local d=$1
  # shellcheck disable=SC1091
  . "$d/env"
  local bin
  bin=$(build_cmd kube-apiserver)
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
    --disable-admission-plugins=TaintNodesByCondition,ServiceAccount \
    --max-requests-inflight=2000 --max-mutating-requests-inflight=1000 \
    --cert-dir="$d/certs" \
    >> "$d/apiserver.log" 2>&1 &
  echo $! > "$d/apiserver.pid"
  if ! wait_for 120 "kube-apiserver /readyz" \
      curl -sf --cacert "$d/ca.crt" -H "Authorization: Bearer berth-admin-token" \
      "https://127.0.0.1:$APISERVER_PORT/readyz"; then
    tail -30 "$d/apiserver.log" >&2
    die "kube-apiserver did not become ready within 120 s (log: $d/apiserver.log)"
  fi
}

# Only the PersistentVolume binder, with the admin's token (no per-controller service
# accounts), no leader election and no serving port (secure or insecure).
cmd_start_controller_manager() {
  local d=${1:?usage: apiserver.sh start-controller-manager DIR}
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
    --controllers=persistentvolume-binder \
    --use-service-account-credentials=false \
    --leader-elect=false \
    --port=0 --secure-port=0 \
    >> "$log" 2>&1 &
  local pid=$! deadline=$((SECONDS + 60))
  echo "$pid" > "$d/controller-manager.pid"
  # Ready once the controller has listed volumes, claims, classes, pods and nodes.
  until awk -v from="$from" 'NR > from && /Caches are synced for persistent volume/ { found = 1; exit }
      END { exit !found }' "$log"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n "+$((from + 1))" "$log" | tail -30 >&2
      rm -f "$d/controller-manager.pid"
      die "kube-controller-manager exited (log: $log)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n "+$((from + 1))" "$log" | tail -30 >&2
      die "kube-controller-manager did not sync the PersistentVolume controller within 60 s (log: $log)"
    fi
    sleep 0.2
  done
}

cmd_start() {
  local d=${1:?usage: apiserver.sh start DIR [--rbac]} authz=AlwaysAllow
  [ "${2:-}" = "--rbac" ] && authz=Node,RBAC
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
  wait_for 30 etcd curl -sf "http://127.0.0.1:$etcd_port/health" \
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
  build) build_cmd kube-apiserver; etcd_bin >/dev/null ;;
  build-scheduler) build_cmd kube-scheduler ;;
  build-controller-manager) build_cmd kube-controller-manager ;;
  start) shift; cmd_start "$@" ;;
  start-controller-manager) cmd_start_controller_manager "${2:-}" ;;
  stop)
    d=${2:?usage: apiserver.sh stop DIR}
    stop_pid "$d/controller-manager.pid" TERM
    stop_pid "$d/apiserver.pid" TERM
    stop_pid "$d/etcd.pid" TERM
    ;;
  kill-apiserver) stop_pid "${2:?DIR}/apiserver.pid" KILL ;;
  start-apiserver) start_apiserver "${2:?DIR}" ;;
  *) echo "usage: apiserver.sh build|build-scheduler|build-controller-manager|start DIR [--rbac]|start-controller-manager DIR|stop DIR|kill-apiserver DIR|start-apiserver DIR" >&2; exit 2 ;;
esac
