#!/usr/bin/env bash
# Run the test suite with the Python that scripts/setup-host.sh installed the toolkit into.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python3; [ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" -m pytest -x -q "$@"
