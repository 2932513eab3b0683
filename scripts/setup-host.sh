#!/usr/bin/env bash
# Prepare a Debian/Ubuntu host for toolkit: Docker engine + BuildKit (the buildx CLI plugin), the base
# images the templates name (pulled, or built locally with debootstrap when no registry is reachable),
# and the Python package itself. Idempotent: every step checks before it acts.
#
#   ./scripts/setup-host.sh [--podman] [--test] [--allow-mixed-release]
#
#   --podman               Podman as the container engine instead of Docker (a Podman-only host):
#                          the host release's podman + crun, uidmap, slirp4netns, fuse-overlayfs; no
#                          Docker is installed or started. Then `toolkit --engine podman ...` (or
#                          TOOLKIT_ENGINE=podman), as root (rootful) or as any user with a
#                          /etc/subuid range (rootless; docs/setup.md, "Podman")
#   --test                 also the test extras, debian:bookworm-slim (the vLLM CPU image's base), and
#                          Podman next to Docker with a rootless test user `toolkit-podman`
#                          (tests/test_e2e_podman.py); the tests build their service images (loopback
#                          registry, testcontainers' reaper) themselves on debian:trixie-slim
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
usage() { sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; }

TEST=0; ALLOW_MIXED=0; PODMAN=0
while [ $# -gt 0 ]; do
  case "$1" in
    --podman) PODMAN=1 ;;
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

# 1. Docker engine with BuildKit (not with --podman: a Podman-only host).
USE_DOCKER=1; [ "$PODMAN" = 1 ] && USE_DOCKER=0
USE_PODMAN=0; { [ "$PODMAN" = 1 ] || [ "$TEST" = 1 ]; } && USE_PODMAN=1
if [ "$USE_DOCKER" = 1 ] && { ! have_engine || ! have_buildx; }; then
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
if [ "$USE_DOCKER" = 1 ] && ! docker info >/dev/null 2>&1; then
  if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
    $SUDO systemctl start docker
  else
    log "starting dockerd (log: /var/log/dockerd.log)"
    $SUDO sh -c 'nohup dockerd >/var/log/dockerd.log 2>&1 &'
  fi
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || die "dockerd did not start; see /var/log/dockerd.log"
fi
[ "$USE_DOCKER" = 0 ] || log "docker $(docker version -f '{{.Server.Version}}'), $(docker buildx version | head -1)"

# 2b. Podman (--podman, --test): the host release's own podman (Debian 12: 4.3.1, Debian 13: 5.4.2;
#     Debian 13's podman on Debian 12 would upgrade ~100 packages: openssl, systemd, glib, util-linux),
#     crun (the runtime that keeps a rootless user's groups: --group-add keep-groups), and for rootless
#     use uidmap (newuidmap), slirp4netns and fuse-overlayfs. Podman needs no daemon: the toolkit starts
#     `podman system service` (its Docker-compatible API) when it needs it.
if [ "$USE_PODMAN" = 1 ]; then
  case "$OS_ID" in debian|ubuntu) ;; *) command -v podman >/dev/null || die "not a Debian/Ubuntu host ($OS_ID): install podman and crun yourself" ;; esac
  if ! command -v podman >/dev/null || ! command -v crun >/dev/null || ! command -v newuidmap >/dev/null; then
    apt_install podman crun uidmap slirp4netns fuse-overlayfs
  fi
  log "$(podman --version), crun $(crun --version | awk 'NR==1 {print $3}')"
fi

# 3. Base images: use the local one, else pull, else build from this host's Debian mirror and tag it
#    with the upstream name so `FROM debian:trixie-slim` resolves locally without a registry.
#    Podman keeps its own store (root's, and one per rootless user): it gets the same image from
#    Docker's store (`docker save | podman load`), else pulled, else imported from the debootstrap
#    rootfs. A copy is kept in $BASE_DIR (docker-archive, world-readable): `toolkit build` on Podman
#    loads a base it lacks from there, so a rootless user's store gets it without a registry.
BASE_DIR=/var/cache/toolkit/base
debootstrap_rootfs() {  # $1 suite -> a rootfs tarball (its path on stdout)
  local suite=$1 mirror root tarball
  mirror=$(debian_mirror)
  [ -n "$mirror" ] || die "no registry for debian:$suite-slim and no Debian mirror in this host's apt sources; set DEBIAN_MIRROR=<URL>"
  log "no registry for debian:$suite-slim: building it with debootstrap ($suite, minbase, $mirror)"
  root=$(mktemp -d); tarball=$(mktemp --suffix=.tar)
  $SUDO debootstrap --variant=minbase "$suite" "$root" "$mirror" >/dev/null
  $SUDO tar -C "$root" -cf "$tarball" .
  $SUDO rm -rf "$root"
  printf '%s\n' "$tarball"
}
ensure_debian_base() {
  local tag=$1 suite=$2 rootfs="" archive
  archive="$BASE_DIR/$(printf '%s' "$tag" | tr '/:' '__').tar"
  if [ "$USE_DOCKER" = 1 ] && ! docker image inspect "$tag" >/dev/null 2>&1; then
    if timeout 60 docker pull -q "$tag" >/dev/null 2>&1; then log "pulled $tag"
    else
      rootfs=$(debootstrap_rootfs "$suite")
      docker import -c 'CMD ["bash"]' "$rootfs" "$tag" >/dev/null
      log "built $tag locally (Docker)"
    fi
  fi
  if [ "$USE_PODMAN" = 1 ]; then
    if ! $SUDO podman image exists "docker.io/library/$tag"; then
      if [ "$USE_DOCKER" = 1 ]; then
        docker save "$tag" | $SUDO podman load -q >/dev/null
        log "$tag: Docker's image loaded into Podman's store"
      elif timeout 60 $SUDO podman pull -q "docker.io/library/$tag" >/dev/null 2>&1; then log "pulled $tag (Podman)"
      else
        [ -n "$rootfs" ] || rootfs=$(debootstrap_rootfs "$suite")
        $SUDO podman import -q -c 'CMD ["bash"]' "$rootfs" "docker.io/library/$tag" >/dev/null
        log "built $tag locally (Podman)"
      fi
    fi
    if [ ! -s "$archive" ]; then
      $SUDO mkdir -p "$BASE_DIR"
      $SUDO podman save -q --format docker-archive -o "$archive.part" "docker.io/library/$tag"
      $SUDO mv "$archive.part" "$archive" && $SUDO chmod 0644 "$archive"
      log "$tag: kept for rootless Podman stores in $archive"
    fi
  fi
  [ -z "$rootfs" ] || $SUDO rm -f "$rootfs"
}
ensure_debian_base debian:trixie-slim trixie
# the vLLM CPU image (tests) uses bookworm: Python 3.11 matches the local torch CPU wheel
if [ "$TEST" = 1 ]; then ensure_debian_base debian:bookworm-slim bookworm; fi

# 3b. Podman on this host: prove a container starts (rootful), and mend the two host conditions that
#     stop it in some sandboxes, each only when its exact error is seen:
#     - crun: "cgroups in hybrid mode not supported, drop all controllers from cgroupv2": a cgroup v1
#       host whose cgroup2 mount still holds a controller (e.g. hugetlb) that no v1 hierarchy has;
#       mounting it as a v1 hierarchy (what crun asks; not kept over a reboot) empties the cgroup2 one;
#     - "setrlimit `RLIMIT_NOFILE`: Operation not permitted": root without CAP_SYS_RESOURCE cannot
#       raise rlimits, and Podman 4 gives containers nofile=1048576 unless told (Podman 5 clamps by
#       itself); a containers.conf drop-in then sets limits this host allows.
podman_probe() { $SUDO podman run --rm --network none docker.io/library/debian:trixie-slim true 2>&1; }
if [ "$USE_PODMAN" = 1 ] && ! out=$(podman_probe); then
  if printf '%s' "$out" | grep -q 'cgroups in hybrid mode not supported'; then
    for c in $(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null); do
      log "crun refuses hybrid cgroups: mounting the $c controller as a cgroup v1 hierarchy (/sys/fs/cgroup/$c)"
      $SUDO mkdir -p "/sys/fs/cgroup/$c" && $SUDO mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c"
    done
    out=$(podman_probe) || true
  fi
  if printf '%s' "$out" | grep -q 'setrlimit'; then
    conf=/etc/containers/containers.conf.d/50-toolkit-rlimits.conf
    $SUDO mkdir -p "$(dirname "$conf")"
    for nproc in "$(ulimit -Hu)" 32768 4096; do  # Podman itself may run under a lower nproc than this shell
      printf '# written by scripts/setup-host.sh: root cannot raise rlimits on this host (no CAP_SYS_RESOURCE)\n[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' \
        "$(ulimit -Hn)" "$(ulimit -Hn)" "$nproc" "$nproc" | $SUDO tee "$conf" >/dev/null
      out=$(podman_probe) && break
    done
    log "root cannot raise rlimits here: $conf sets the containers' limits ($(grep default_ulimits "$conf"))"
  fi
  out=$(podman_probe) || die "podman cannot start a container on this host: $out"
fi
[ "$USE_PODMAN" = 0 ] || log "podman runs containers (rootful)"

# 3c. --test: a rootless Podman user for the e2e tests (tests/test_e2e_podman.py): toolkit-podman with
#     a /etc/subuid + /etc/subgid range, the native overlay driver (vfs would copy every layer), a
#     runtime dir, the base image in its own store, and a Python venv with the toolkit's
#     dependencies that it can read (the tests put the checkout's code first on PYTHONPATH).
PODMAN_USER=toolkit-podman
if [ "$TEST" = 1 ]; then
  id "$PODMAN_USER" >/dev/null 2>&1 || $SUDO useradd --create-home --shell /bin/bash "$PODMAN_USER"
  # a group standing in for render/video: the keep-groups test gives a device node to it alone
  getent group toolkit-gpu-test >/dev/null || $SUDO groupadd toolkit-gpu-test
  id -nG "$PODMAN_USER" | grep -qw toolkit-gpu-test || $SUDO usermod -aG toolkit-gpu-test "$PODMAN_USER"
  for f in /etc/subuid /etc/subgid; do
    grep -q "^$PODMAN_USER:" "$f" 2>/dev/null || printf '%s:200000:65536\n' "$PODMAN_USER" | $SUDO tee -a "$f" >/dev/null
  done
  uid=$(id -u "$PODMAN_USER"); home=$(getent passwd "$PODMAN_USER" | cut -d: -f6)
  $SUDO install -d -m 0700 -o "$PODMAN_USER" -g "$PODMAN_USER" "/run/user/$uid"
  if [ ! -f "$home/.config/containers/storage.conf" ]; then
    $SUDO install -d -o "$PODMAN_USER" -g "$PODMAN_USER" "$home/.config" "$home/.config/containers"
    printf '[storage]\ndriver = "overlay"\n' | $SUDO tee "$home/.config/containers/storage.conf" >/dev/null
    $SUDO chown "$PODMAN_USER:" "$home/.config/containers/storage.conf"
  fi
  as_podman_user() { $SUDO su "$PODMAN_USER" -s /bin/sh -c "cd /tmp && XDG_RUNTIME_DIR=/run/user/$uid $1"; }
  as_podman_user "podman image exists docker.io/library/debian:trixie-slim || podman load -q -i $BASE_DIR/debian_trixie-slim.tar >/dev/null"
  out=$(as_podman_user "podman run --rm --network none --group-add keep-groups docker.io/library/debian:trixie-slim true" 2>&1) \
    || die "rootless podman (user $PODMAN_USER) cannot start a container: $out"
  log "rootless podman runs containers (user $PODMAN_USER, keep-groups)"
  venv=/opt/toolkit-test/venv
  if ! "$venv/bin/python" -c 'import docker, click, pydantic, jinja2, gguf' 2>/dev/null; then
    [ -x /usr/bin/python3 ] || apt_install python3
    /usr/bin/python3 -m venv "$venv" 2>/dev/null || { apt_install python3-venv; /usr/bin/python3 -m venv "$venv"; }
    "$venv/bin/pip" install -q . 2>/dev/null
    log "$venv: the toolkit's dependencies, for the rootless test user"
  fi
fi

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
