#!/usr/bin/env bash
# Prepare a Debian/Ubuntu host for toolkit: Docker engine + BuildKit (the buildx CLI plugin), the base
# images the templates name (pulled, or built locally with debootstrap when no registry is reachable),
# and the Python package itself. Idempotent: every step checks before it acts.
#
#   ./scripts/setup-host.sh [--test] [--allow-mixed-release]
#
#   --test                 also the test extras and debian:bookworm-slim (the vLLM CPU image's base);
#                          the tests build their service images (loopback registry, testcontainers'
#                          reaper) themselves on debian:trixie-slim
#   --allow-mixed-release  consent, on Debian 12 without Docker's repository, to Debian 13's docker.io
#                          and what it pulls: libc6 2.36 -> 2.41 and base-files, after which
#                          /etc/os-release names Debian 13 (a mixed release). Without it only
#                          docker-buildx may come from Debian 13. CI and the test command pass it.
#
# Where Docker comes from (the first that works):
#   1. an engine and buildx already installed: nothing changes;
#   2. Docker's own apt repository (docker-ce + docker-buildx-plugin), when download.docker.com answers;
#   3. the host release's own packages (docker.io + docker-buildx: Debian 13, Ubuntu 24.04);
#   4. Debian 12: its own docker.io (dockerd 20.10, whose built-in BuildKit runs the templates'
#      RUN --mount=type=cache/secret: the CPU image was built through the toolkit on it) plus ONE
#      package from Debian 13, docker-buildx (a Go binary needing libc6 >= 2.34; Debian 12 has
#      2.36). Debian 13 becomes an apt source pinned so that no other package can come from it
#      (priority -1). With --allow-mixed-release instead Debian 13's docker.io 26 + docker-buildx
#      and whatever they pull (libc6, base-files: the mixed release CI machines run on).
#      The apt-get -s plan is printed first; without the flag, a plan that would take anything but
#      docker-buildx from Debian 13 is refused.
# The toolkit builds with `docker buildx build` (it needs --load, --secret and --metadata-file, which
# names the image ID the build wrote), so a Docker without the buildx plugin is not enough.
#
# The Debian mirror (debootstrap, the Debian 13 source) is the one this host's apt sources use
# (`apt-get indextargets`), or $DEBIAN_MIRROR; no mirror URL is written into this script.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'; }

TEST=0; ALLOW_MIXED=0
while [ $# -gt 0 ]; do
  case "$1" in
    --test) TEST=1 ;;
    --allow-mixed-release) ALLOW_MIXED=1 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option '$1'" ;;
  esac
  shift
done

SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
# shellcheck disable=SC1091
. /etc/os-release
OS_ID=${ID:-unknown}; CODENAME=${VERSION_CODENAME:-}; RELEASE=${VERSION_ID:-}

need_apt_update=1
apt_update() { $SUDO apt-get update -qq; need_apt_update=0; }
apt_install() {
  [ "$need_apt_update" = 0 ] || apt_update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# The Debian mirror this host's apt already uses: $DEBIAN_MIRROR, else the first configured Debian
# archive (origin and label "Debian": not the security archive) that apt has a Release file for.
debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then printf '%s\n' "${DEBIAN_MIRROR%/}"; return; fi
  [ "$need_apt_update" = 0 ] || apt_update
  apt-get indextargets --format '$(ORIGIN)|$(LABEL)|$(REPO_URI)' 2>/dev/null \
    | awk -F'|' '$1 == "Debian" && $2 == "Debian" {sub(/\/$/, "", $3); print $3; exit}'
}

url_ok() {  # URL answers within 10 s
  if command -v curl >/dev/null; then curl -fsS --max-time 10 -o /dev/null "$1" 2>/dev/null
  else python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' "$1" 2>/dev/null; fi
}

# Does the host's own release (any of its suites: -updates, -security, -backports) offer package $1?
in_host_release() {
  [ "$need_apt_update" = 0 ] || apt_update
  apt-cache madison "$1" 2>/dev/null | awk -F'|' -v c="$CODENAME" '$3 ~ (" " c "[-/]") {f = 1} END {exit !f}'
}

have_engine() { command -v dockerd >/dev/null 2>&1; }
have_buildx() { docker buildx version >/dev/null 2>&1; }

DOCKER_REPO="https://download.docker.com/linux/$OS_ID"
docker_repo_reachable() { [ -n "$CODENAME" ] && url_ok "$DOCKER_REPO/dists/$CODENAME/Release"; }

docker_from_docker_repo() {  # Docker's documented apt install (docs.docker.com/engine/install/debian)
  local repo=$DOCKER_REPO
  log "installing Docker from Docker's apt repository ($repo, $CODENAME)"
  command -v curl >/dev/null || apt_install ca-certificates curl
  $SUDO install -m 0755 -d /etc/apt/keyrings
  $SUDO curl -fsSL "$repo/gpg" -o /etc/apt/keyrings/docker.asc
  $SUDO chmod a+r /etc/apt/keyrings/docker.asc
  printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: stable\nSigned-By: /etc/apt/keyrings/docker.asc\n' \
    "$repo" "$CODENAME" | $SUDO tee /etc/apt/sources.list.d/docker.sources >/dev/null
  apt_update
  if have_engine && dpkg -s docker.io >/dev/null 2>&1; then
    apt_install docker-buildx-plugin  # docker.io conflicts with docker-ce: add only the plugin
  else
    apt_install docker-ce docker-ce-cli containerd.io docker-buildx-plugin
  fi
}

docker_from_host_release() {
  log "installing docker.io + docker-buildx from $PRETTY_NAME's own archive"
  if have_engine; then apt_install docker-buildx; else apt_install docker.io docker-buildx; fi
}

# Debian 12 without Docker's repository. Default: its own docker.io + docker-buildx alone from Debian 13
# (every other Debian 13 package pinned -1: never installed). --allow-mixed-release: the Debian 13
# path (docker.io 26 + docker-buildx from Debian 13, with whatever they pull). The apt-get -s plan is
# printed first either way; without the flag a plan that takes anything but docker-buildx from Debian
# 13 is refused and the added source removed again.
docker_from_next_debian() {
  local next=trixie mirror src=/etc/apt/sources.list.d/toolkit-trixie.sources pin=/etc/apt/preferences.d/toolkit-trixie
  mirror=$(debian_mirror)
  [ -n "$mirror" ] || die "no Debian mirror in this host's apt sources; set DEBIAN_MIRROR=<your Debian mirror URL>"
  local others=-1 want=(docker-buildx)
  if [ "$ALLOW_MIXED" = 1 ]; then
    others=100; want=(-t "$next" docker.io docker-buildx)
  elif ! have_engine; then
    want=(docker.io docker-buildx)
  fi
  log "adding Debian $next ($mirror) as an apt source: docker-buildx pinned 500, every other package $others"
  printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" "$next" | $SUDO tee "$src" >/dev/null
  printf 'Package: docker-buildx\nPin: release n=%s\nPin-Priority: 500\n\nPackage: *\nPin: release n=%s\nPin-Priority: %s\n' \
    "$next" "$next" "$others" | $SUDO tee "$pin" >/dev/null
  apt_update
  local plan foreign
  plan=$(LC_ALL=C apt-get -s install --no-install-recommends "${want[@]}" 2>&1) || {
    printf '%s\n' "$plan" >&2
    $SUDO rm -f "$src" "$pin"; apt_update
    die "apt cannot install ${want[*]} with only docker-buildx from Debian $next (plan above); rerun with --allow-mixed-release to take Debian $next's docker.io and what it needs"
  }
  # every package the plan takes from another release than this host's (Debian:$RELEASE / Debian-Security:$RELEASE)
  foreign=$(printf '%s\n' "$plan" | awk '/^Inst /' | grep -Ev "Debian[-A-Za-z]*:${RELEASE}([./][^ ]*)?/" || true)
  log "apt-get -s install ${want[*]}: packages from Debian $next ([installed version] (new version)):"
  printf '%s\n' "$foreign" | sed 's/^Inst /[setup]   /' >&2
  if printf '%s\n' "$foreign" | awk '/^Inst / && $2 != "docker-buildx" {f = 1} END {exit !f}'; then
    if [ "$ALLOW_MIXED" != 1 ]; then
      $SUDO rm -f "$src" "$pin"; apt_update
      die "this plan installs or upgrades packages of Debian $next besides docker-buildx (listed above), which makes this host a mixed release; rerun with --allow-mixed-release to accept it, or install Docker with buildx from Docker's apt repository"
    fi
    log "--allow-mixed-release: taking them (this host becomes a mixed $CODENAME/$next release; \`toolkit doctor\` will say so)"
  fi
  apt_install "${want[@]}"
}

# 1. Docker engine with BuildKit.
if ! have_engine || ! have_buildx; then
  case "$OS_ID" in debian|ubuntu) ;; *) die "not a Debian/Ubuntu host ($OS_ID): install Docker with the buildx plugin yourself" ;; esac
  # choose first, then install outside any `||`/`if` (where bash ignores `set -e` inside functions)
  if docker_repo_reachable; then how=docker_from_docker_repo
  elif in_host_release docker-buildx; then how=docker_from_host_release
  elif [ "$OS_ID" = debian ] && [ "$CODENAME" = bookworm ]; then how=docker_from_next_debian
  else die "no Docker with buildx for $PRETTY_NAME: Docker's apt repository is unreachable and this release has no docker-buildx package"
  fi
  "$how"
fi
command -v debootstrap >/dev/null || apt_install debootstrap

# 2. Start the engine when it is not answering (no systemd in containers/CI sandboxes).
if ! docker info >/dev/null 2>&1; then
  if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
    $SUDO systemctl start docker
  else
    log "starting dockerd (log: /var/log/dockerd.log)"
    $SUDO sh -c 'nohup dockerd >/var/log/dockerd.log 2>&1 &'
  fi
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || die "dockerd did not start; see /var/log/dockerd.log"
fi
log "docker $(docker version -f '{{.Server.Version}}'), $(docker buildx version | head -1)"

# 3. Base images: use the local one, else pull, else build from this host's Debian mirror and tag it
#    with the upstream name so `FROM debian:trixie-slim` resolves locally without a registry.
ensure_debian_base() {
  local tag=$1 suite=$2 mirror root
  docker image inspect "$tag" >/dev/null 2>&1 && return 0
  if timeout 60 docker pull -q "$tag" >/dev/null 2>&1; then log "pulled $tag"; return 0; fi
  mirror=$(debian_mirror)
  [ -n "$mirror" ] || die "no registry for $tag and no Debian mirror in this host's apt sources; set DEBIAN_MIRROR=<URL>"
  log "no registry for $tag: building it with debootstrap ($suite, minbase, $mirror)"
  root=$(mktemp -d)
  $SUDO debootstrap --variant=minbase "$suite" "$root" "$mirror" >/dev/null
  $SUDO tar -C "$root" -c . | docker import -c 'CMD ["bash"]' - "$tag" >/dev/null
  $SUDO rm -rf "$root"
  log "built $tag locally"
}
ensure_debian_base debian:trixie-slim trixie
# the vLLM CPU image (tests) uses bookworm: Python 3.11 matches the local torch CPU wheel
if [ "$TEST" = 1 ]; then ensure_debian_base debian:bookworm-slim bookworm; fi

# 4. The toolkit itself (editable, with test extras when asked). A distribution Python that is
#    "externally managed" (PEP 668, Debian 12+/Ubuntu 23.04+) gets a .venv here, linked onto PATH.
extras=""; [ "$TEST" = 1 ] && extras="[test]"
PY=python3
if [ -x .venv/bin/python ] || python3 -c 'import os,sys,sysconfig; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'; then
  [ -x .venv/bin/python ] || { python3 -m venv .venv 2>/dev/null || { apt_install python3-venv python3-pip; python3 -m venv .venv; }; }
  PY=.venv/bin/python
  $SUDO ln -sf "$PWD/.venv/bin/toolkit" /usr/local/bin/toolkit
fi
$PY -m pip install -q -e ".${extras}"
log "ready: run 'toolkit doctor' to see what this host can run"
