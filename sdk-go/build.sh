#!/bin/sh
# Builds a Go plugin directory into a Berth component:
#   sdk-go/build.sh PLUGIN_DIR OUT.wasm
# 1. berth-go-bindgen (sdk-go/bindgen, built with cargo unless $BERTH_GO_BINDGEN
#    names it) generates the Go bindings to wit/ into a temporary file, which
#    `go build -overlay` places in sdk-go/internal/wit: nothing is written to the
#    source tree.
# 2. The machine's Go builds a WASI preview 1 reactor
#    (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared).
# 3. berth-go-bindgen embeds the WIT and adapts preview 1 to the component model.
set -eu
sdk=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$sdk")
[ $# -eq 2 ] || { echo "usage: $0 PLUGIN_DIR OUT.wasm" >&2; exit 2; }
dir=$(cd "$1" && pwd)
out=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bindgen=${BERTH_GO_BINDGEN:-}
if [ -z "$bindgen" ]; then
  cargo build --release --quiet --manifest-path "$repo/Cargo.toml" -p berth-go-bindgen
  target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$repo/Cargo.toml" |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
  bindgen=$target/release/berth-go-bindgen
fi

"$bindgen" bindings "$repo/wit" "$tmp/zz_bindings.go"
printf '{"Replace":{"%s":"%s"}}\n' "$sdk/internal/wit/zz_bindings.go" "$tmp/zz_bindings.go" >"$tmp/overlay.json"
(cd "$dir" && GOTOOLCHAIN=${GOTOOLCHAIN:-local} GOOS=wasip1 GOARCH=wasm \
  go build -buildmode=c-shared -overlay "$tmp/overlay.json" -o "$tmp/core.wasm" .)
"$bindgen" component "$repo/wit" "$tmp/core.wasm" "$out"
