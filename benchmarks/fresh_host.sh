#!/usr/bin/env bash
# First table on a fresh Debian 12 host (benchmark, not a test): a privileged debian:bookworm-slim
# container stands in for the host (its own dockerd, installed by setup-host.sh; empty caches; its own
# network namespace, so nothing of this machine's engine is used). Inside, a newcomer's steps from
# README: apt prerequisites (git, python3), a clone, then
#     ./scripts/setup-host.sh && toolkit build && toolkit bench
# each timed. Needs a Docker engine with the bridge network and debian:bookworm-slim (setup-host.sh
# --test provides it). ~4 min on the 2-core machine.
#
#   sudo benchmarks/fresh_host.sh [WORKDIR]      (default /tmp/fresh-host; logs and times there)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${1:-/tmp/fresh-host}
rm -rf "$W"; mkdir -p "$W/out" "$W/docker"
cat > "$W/inner.sh" <<'INNER'
#!/bin/bash
set -u
ts() { date +%s; }
log() { echo "[fresh $(date +%T)] $*" | tee -a /out/times.log; }
# the host init's duty (docker:dind does the same): let the inner dockerd create cgroups
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  mkdir -p /sys/fs/cgroup/init
  xargs -rn1 < /sys/fs/cgroup/cgroup.procs > /sys/fs/cgroup/init/cgroup.procs 2>/dev/null || :
  sed -e 's/ / +/g' -e 's/^/+/' < /sys/fs/cgroup/cgroup.controllers > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || :
fi
t0=$(ts); log "start"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq > /out/prereq.log 2>&1 && apt-get install -y -qq git ca-certificates python3 >> /out/prereq.log 2>&1
log "prerequisites (git, python3) rc=$? $(( $(ts) - t0 )) s"
git clone -q /src /root/toolkit && cd /root/toolkit
t1=$(ts)
./scripts/setup-host.sh > /out/setup.log 2>&1; log "setup-host rc=$? $(( $(ts) - t1 )) s"
toolkit build > /out/build.log 2>&1; log "toolkit build rc=$? $(( $(ts) - t1 )) s"
toolkit bench > /out/bench.log 2>&1; log "toolkit bench rc=$? $(( $(ts) - t1 )) s (first table; $(( $(ts) - t0 )) s with prerequisites)"
pkill dockerd; sleep 3
INNER
docker run --rm --privileged --name toolkit-fresh-host \
  -v "$W/docker:/var/lib/docker" -v "$W/out:/out" -v "$W/inner.sh:/inner.sh:ro" -v "$ROOT:/src:ro" \
  -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/host-ca.crt:ro \
  -e PIP_CERT=/etc/ssl/certs/host-ca.crt -e GIT_CONFIG_COUNT=1 -e GIT_CONFIG_KEY_0=safe.directory -e GIT_CONFIG_VALUE_0='*' \
  debian:bookworm-slim bash /inner.sh > "$W/out/container.log" 2>&1
cat "$W/out/times.log"
