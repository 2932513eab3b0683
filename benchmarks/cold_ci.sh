#!/usr/bin/env bash
# Cold CI, measured without touching the shared engine (benchmark, not a test): a second dockerd with
# an empty data root on its own socket, empty toolkit / pip / contract caches, a fresh clone of HEAD
# with its own .venv; then exactly what .ci/run does, timed.
#
#   sudo benchmarks/cold_ci.sh [WORKDIR]      (default /tmp/cold-ci; needs dockerd, ~30 min, ~15 GB)
#
# Prints "setup <s>", "tests <s> rc=<rc>" and the total; logs in WORKDIR. Docker's own packages are
# already installed on the machine (their install is part of benchmarks/fresh_host.sh's figure).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
C=${1:-/tmp/cold-ci}
rm -rf "$C"; mkdir -p "$C/e" "$C/cache"
dockerd --data-root "$C/e/data" --exec-root "$C/e/exec" --pidfile "$C/e/docker.pid" -H "unix://$C/e/docker.sock" \
  --bridge none --iptables=false --ip6tables=false > "$C/dockerd.log" 2>&1 &
DPID=$!
for _ in $(seq 60); do docker -H "unix://$C/e/docker.sock" info >/dev/null 2>&1 && break; sleep 1; done
export DOCKER_HOST="unix://$C/e/docker.sock" XDG_CACHE_HOME="$C/cache" TOOLKIT_CACHE="$C/cache/toolkit" \
  PIP_CACHE_DIR="$C/cache/pip" TOOLKIT_VLLM_CONTRACT_DIR="$C/cache/toolkit/vllm-contract" \
  TOOLKIT_SGLANG_CONTRACT_DIR="$C/cache/toolkit/sglang-contract"
t0=$(date +%s)
git clone -q "$ROOT" "$C/repo" && cd "$C/repo" && python3 -m venv .venv
./scripts/setup-host.sh --test --allow-mixed-release > "$C/setup.log" 2>&1; t1=$(date +%s)
echo "setup $((t1 - t0)) s"
./scripts/run-tests.sh all --durations=40 > "$C/tests.log" 2>&1; rc=$?; t2=$(date +%s)
echo "tests $((t2 - t1)) s rc=$rc ($(tail -1 "$C/tests.log"))"
echo "total $((t2 - t0)) s"
kill "$DPID"; wait "$DPID" 2>/dev/null
# a dockerd started with --bridge none deletes the host's docker0 link: put it back for the main engine
if ! ip link show docker0 >/dev/null 2>&1; then
  ip link add docker0 type bridge && ip addr add 172.17.0.1/16 dev docker0 && ip link set docker0 up
fi
exit "$rc"
