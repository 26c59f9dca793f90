#!/bin/sh
# Builds a Go plugin directory into a Berth component:
#   sdk-go/build.sh PLUGIN_DIR OUT.wasm
# It is `berth plugin build` for a checkout without a built berth:
# berth-go-bindgen (sdk-go/bindgen, built with cargo unless $BERTH_GO_BINDGEN
# names it) copies the SDK and the Go bindings it generates from wit/ into a
# temporary directory joined to the plugin's module by a go.work (nothing is
# written to the source tree), runs the machine's Go ($GO, else go) for a WASI
# preview 1 reactor (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared), then
# embeds the WIT and adapts preview 1 to the component model.
set -eu
sdk=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$sdk")
[ $# -eq 2 ] || { echo "usage: $0 PLUGIN_DIR OUT.wasm" >&2; exit 2; }
dir=$(cd "$1" && pwd)
out=$2

bindgen=${BERTH_GO_BINDGEN:-}
if [ -z "$bindgen" ]; then
  cargo build --release --quiet --manifest-path "$repo/Cargo.toml" -p berth-go-bindgen
  target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$repo/Cargo.toml" |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
  bindgen=$target/release/berth-go-bindgen
fi

GO=${GO:-go} "$bindgen" build "$repo/wit" "$dir" "$out"
