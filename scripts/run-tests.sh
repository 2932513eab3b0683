#!/usr/bin/env bash
# Run the tests at one level, with the Python that scripts/setup-host.sh installed the toolkit into.
#
#   ./scripts/run-tests.sh [fast|contract|e2e|all] [pytest args...]      (default: all — what CI runs)
#
#   fast      -m "not e2e and not contract": no Docker engine, no network. Run in a network namespace
#             without interfaces (loopback only) and with DOCKER_HOST pointing nowhere when this user
#             may (`unshare -n`, root), so a test that needs either fails instead of passing on luck.
#   contract  -m contract: the pinned vLLM/SGLang releases' own parsers in cached venvs and the pinned
#             llama.cpp tree; the first run downloads them from PyPI (~/.cache/toolkit/, several GB).
#   e2e       -m e2e: the real Docker engine (builds the CPU image, runs llama-bench / vLLM on the CPU).
#   all       every test (the three levels together).
#
# Levels are pytest markers registered in pyproject.toml; tests/conftest.py puts every test that uses
# a pinned-download fixture into `contract`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python3; [ -x .venv/bin/python ] && PY=.venv/bin/python
# the interpreter's defaults, as a user's host has them: a PYTHONUNBUFFERED=1 left in this workplace's
# environment hid a failure only buffered stdout shows (`report > /dev/full` exited 120 on a fresh host)
unset PYTHONUNBUFFERED
# the toolkit of this checkout, also in the subprocesses tests start: an editable install of another
# checkout (a second worktree beside the first) would otherwise answer them
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

level=all
case "${1:-}" in
  fast|contract|e2e|all) level=$1; shift ;;
  -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*|"") ;;
  *) echo "run-tests.sh: unknown level '$1' (fast | contract | e2e | all)" >&2; exit 4 ;;
esac

pytest=("$PY" -m pytest -x -q)
case "$level" in
  fast)
    pytest+=(-m "not e2e and not contract")
    if [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then
      # loopback up (tests may serve files to themselves), nothing else; no Docker socket
      exec unshare -n sh -c 'ip link set lo up 2>/dev/null || true; DOCKER_HOST=unix:///nonexistent/docker.sock exec "$@"' \
        sh "${pytest[@]}" "$@"
    fi
    echo "run-tests.sh: cannot enter a network namespace (needs root and unshare): running fast tests unisolated" >&2
    export DOCKER_HOST=unix:///nonexistent/docker.sock
    ;;
  contract) pytest+=(-m contract) ;;
  e2e) pytest+=(-m e2e) ;;
  all) ;;
esac
exec "${pytest[@]}" "$@"
