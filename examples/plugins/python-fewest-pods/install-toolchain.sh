#!/bin/sh
# Installs componentize-py from PyPI into a virtual environment outside the
# repository (~/.cache/berth-py), where build.sh and the tests look for it.
# Needs python3 with venv, and network access to PyPI; run it once.
set -eu
venv=${BERTH_PY_VENV:-"$HOME/.cache/berth-py"}
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet componentize-py==0.25.1
echo "componentize-py installed: $venv/bin/componentize-py"
