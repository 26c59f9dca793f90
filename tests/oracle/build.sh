#!/usr/bin/env bash
# Builds berth-oracle (kube-scheduler 1.37.2's framework and plugins answering
# `berth explain`'s question; see README.md) once, into a cache outside the
# repository, and prints the binary's path on stdout.
#
#   build.sh            build when missing; print the path
#
# The module here (berth.dev/tests/oracle: k8s.io/kubernetes v1.37.2 with its staging
# modules at v0.37.2) is built with Go 1.26 or newer on PATH, GOTOOLCHAIN=local,
# -mod=readonly -trimpath and CGO_ENABLED=0 (as tests/e2e/apiserver.sh builds the
# control plane, so the two share Go's build cache). The binary goes to
# $BERTH_E2E_CACHE (default $XDG_CACHE_HOME/berth-e2e, else ~/.cache/berth-e2e)
# under oracle-<build id>/, the build id being the hash of the module's Go files,
# go.mod and go.sum: a change to any of them is a new build. $BERTH_ORACLE_BIN may
# name an existing binary; then nothing is built and that path is printed.
set -euo pipefail

cache="${BERTH_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/berth-e2e}"
module="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
k8s_version=1.37.2

log() { echo "oracle/build.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

if [ -n "${BERTH_ORACLE_BIN:-}" ]; then
  [ -x "$BERTH_ORACLE_BIN" ] || die "BERTH_ORACLE_BIN=$BERTH_ORACLE_BIN is not an executable file"
  echo "$BERTH_ORACLE_BIN"
  exit 0
fi

# The files that decide what is built (README.md, compare.py and this script do not).
build_id="$k8s_version-$(cd "$module" && find . -maxdepth 1 -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) \
  | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-12)"
dir="$cache/oracle-$build_id"
bin="$dir/berth-oracle"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

# Go as k8s.io/kubernetes v1.37.2 asks (go.mod: go 1.26.0); the build never switches
# toolchains behind the caller's back.
command -v go >/dev/null || die "go not found: building berth-oracle needs Go 1.26 or newer on PATH (or set BERTH_ORACLE_BIN)"
v=$(GOTOOLCHAIN=local go env GOVERSION)
case "$v" in
  go1.2[6-9]*|go1.[3-9][0-9]*|go[2-9]*) ;;
  *) die "$(command -v go) is $v: building berth-oracle (Kubernetes $k8s_version) needs Go 1.26 or newer (or set BERTH_ORACLE_BIN)" ;;
esac

log "building berth-oracle (kube-scheduler $k8s_version's framework) into $dir (modules from the Go proxy on the first build)"
# Built aside and moved in whole, so that a build interrupted or run twice at once
# never leaves a partial program where the next call looks.
mkdir -p "$dir"
out=$(mktemp -d "$dir/build.XXXXXX")
(cd "$module" && GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
  go build -trimpath -ldflags "-s -w" -o "$out/berth-oracle" . >&2) \
  || { rm -rf "$out"; die "go build of berth-oracle failed (module: $module)"; }
mv -f "$out/berth-oracle" "$bin"
rmdir "$out"
echo "$bin"
