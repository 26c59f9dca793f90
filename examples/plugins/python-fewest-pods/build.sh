#!/bin/sh
# Builds FewestPods into a component with componentize-py (from PyPI; see
# install-toolchain.sh): ./build.sh [OUT.wasm] (default: fewest_pods.wasm here).
# componentize-py is $COMPONENTIZE_PY, else ~/.cache/berth-py's, else on PATH.
# The WIT package of the repository is the contract the Python code is built against.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/fewest_pods.wasm"}
if [ -z "${COMPONENTIZE_PY:-}" ] && [ -x "$HOME/.cache/berth-py/bin/componentize-py" ]; then
  COMPONENTIZE_PY="$HOME/.cache/berth-py/bin/componentize-py"
fi
tool=${COMPONENTIZE_PY:-componentize-py}
"$tool" -d "$here/../../../wit" -w scheduler-plugin componentize -p "$here" app -o "$out"
