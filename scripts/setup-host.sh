#!/usr/bin/env bash
# Prepare a Debian/Ubuntu host for toolkit: Docker engine + BuildKit (buildx), the base images the
# templates name (pulled, or built locally with debootstrap when no registry is reachable), and the
# Python package itself. Idempotent: every step checks before it acts.
# Recipe measured on a Debian 12 host (docker.io + docker-buildx 0.13 from trixie, pinned low).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

need_apt_update=1
apt_install() {
  if [ "$need_apt_update" = 1 ]; then $SUDO apt-get update -qq; need_apt_update=0; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# 1. Docker engine with BuildKit. Debian 12 ships dockerd 20.10 without buildx; Debian 13 (trixie)
#    packages docker-buildx, so trixie is added as a low-priority source that moves nothing else.
if ! docker buildx version >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1; then
  . /etc/os-release
  if [ "${VERSION_CODENAME:-}" = bookworm ]; then
    if [ ! -f /etc/apt/sources.list.d/trixie.sources ]; then
      log "adding Debian trixie as a pinned (priority 100) apt source for docker-buildx"
      printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        | $SUDO tee /etc/apt/sources.list.d/trixie.sources >/dev/null
      printf 'Package: *\nPin: release n=trixie\nPin-Priority: 100\n' \
        | $SUDO tee /etc/apt/preferences.d/trixie-low >/dev/null
      need_apt_update=1
    fi
    log "installing docker.io + docker-buildx from trixie"
    apt_install -t trixie docker.io docker-buildx
  else
    log "installing docker.io + docker-buildx"
    apt_install docker.io docker-buildx || apt_install docker.io docker-buildx-plugin
  fi
fi
command -v debootstrap >/dev/null || apt_install debootstrap
# A registry on loopback for `toolkit push` tests (Debian's distribution 2.8 package).
if [ "${1:-}" = "--test" ]; then command -v docker-registry >/dev/null || apt_install docker-registry; fi

# 2. Start the engine when it is not answering (no systemd in containers/CI sandboxes).
if ! docker info >/dev/null 2>&1; then
  if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
    $SUDO systemctl start docker
  else
    log "starting dockerd (log: /var/log/dockerd.log)"
    $SUDO sh -c 'nohup dockerd >/var/log/dockerd.log 2>&1 &'
  fi
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { log "dockerd did not start; see /var/log/dockerd.log"; exit 1; }
fi
log "docker $(docker version -f '{{.Server.Version}}'), $(docker buildx version | head -1)"

# 3. Base images: use the local one, else pull, else build from Debian's mirror and tag it with
#    the upstream name so `FROM debian:trixie-slim` resolves locally without a registry.
ensure_debian_base() {
  local tag=$1 suite=$2
  docker image inspect "$tag" >/dev/null 2>&1 && return 0
  if timeout 60 docker pull -q "$tag" >/dev/null 2>&1; then log "pulled $tag"; return 0; fi
  log "no registry for $tag: building it with debootstrap ($suite, minbase)"
  local root; root=$(mktemp -d)
  $SUDO debootstrap --variant=minbase "$suite" "$root" http://deb.debian.org/debian >/dev/null
  $SUDO tar -C "$root" -c . | docker import -c 'CMD ["bash"]' - "$tag" >/dev/null
  $SUDO rm -rf "$root"
  log "built $tag locally"
}
ensure_debian_base debian:trixie-slim trixie
# the vLLM CPU image (tests) uses bookworm: Python 3.11 matches the local torch CPU wheel
if [ "${1:-}" = "--test" ]; then ensure_debian_base debian:bookworm-slim bookworm; fi

# 4. The toolkit itself (editable, with test extras when asked). A distribution Python that is
#    "externally managed" (PEP 668, Debian 12+/Ubuntu 23.04+) gets a .venv here, linked onto PATH.
extras=""; [ "${1:-}" = "--test" ] && extras="[test]"
PY=python3
if [ -x .venv/bin/python ] || python3 -c 'import os,sys,sysconfig; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'; then
  [ -x .venv/bin/python ] || { python3 -m venv .venv 2>/dev/null || { apt_install python3-venv python3-pip; python3 -m venv .venv; }; }
  PY=.venv/bin/python
  $SUDO ln -sf "$PWD/.venv/bin/toolkit" /usr/local/bin/toolkit
fi
$PY -m pip install -q -e ".${extras}"
log "ready: run 'toolkit doctor' to see what this host can run"
