#!/bin/sh
# Builds FewestPods into a component with componentize-py (from PyPI):
#   python3 -m venv ~/.cache/berth-py && ~/.cache/berth-py/bin/pip install componentize-py==0.25.1
#   COMPONENTIZE_PY=~/.cache/berth-py/bin/componentize-py ./build.sh [OUT.wasm]
# The WIT package of the repository is the contract the Python code is built against.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/fewest_pods.wasm"}
tool=${COMPONENTIZE_PY:-componentize-py}
"$tool" -d "$here/../../../wit" -w scheduler-plugin componentize -p "$here" app -o "$out"
