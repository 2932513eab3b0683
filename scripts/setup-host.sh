#!/usr/bin/env bash
# Prepare a Debian/Ubuntu host for toolkit: Docker engine + BuildKit (the buildx CLI plugin), the base
# images the templates name (pulled, or built locally with debootstrap when no registry is reachable),
# and the Python package itself. Idempotent: every step checks before it acts.
#
#   ./scripts/setup-host.sh [--podman] [--test] [--allow-mixed-release]
#
#   --podman               Podman as the container engine instead of Docker (a Podman-only host):
#                          the host release's podman + crun, uidmap, slirp4netns, fuse-overlayfs
#                          (Podman 5: passt too, its rootless network); no
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
shopt -s inherit_errexit  # a failing command inside $(...) fails the script too
# a non-root login shell's PATH on Debian has no sbin: dockerd, usermod, debootstrap live there
PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }
usage() { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; }

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
# the user who runs `toolkit` after this script: the caller, or the user behind `sudo ./scripts/setup-host.sh`
CALLER=${SUDO_USER:-$(id -un)}
# shellcheck disable=SC1091
. /etc/os-release
OS_ID=${ID:-unknown}; CODENAME=${VERSION_CODENAME:-}; RELEASE=${VERSION_ID:-}

# Long steps run with a sign of life every 30 s; their output goes to one log, whose last lines are
# shown when a step fails (the log is the caller's own file: nothing here writes as root into /tmp).
SETUP_LOG=$(mktemp -t toolkit-setup.XXXXXX.log)
step() {  # [TRIES=N] step WHAT CMD...: run CMD (output to $SETUP_LOG), say it still runs every 30 s
  local what=$1 t0=$SECONDS pid rc=0 n=0 try; shift
  log "$what"
  for try in $(seq "${TRIES:-1}"); do
    if [ "$try" != 1 ]; then  # say why, and keep the log (a mirror's download can fail once)
      RETRIED=1
      local last; last=$(tail -n 1 "$SETUP_LOG" | cut -c1-160)
      case "$last" in "### "*) last="no output" ;; esac
      log "  ... failed (exit $rc: $last); trying again, try $try of ${TRIES:-1} (output: $SETUP_LOG)"
    fi
    printf '\n### %s: %s\n' "$what" "$*" >>"$SETUP_LOG"
    rc=0
    "$@" >>"$SETUP_LOG" 2>&1 </dev/null &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      sleep 1; n=$((n + 1))
      [ $((n % 30)) != 0 ] || log "  ... still running ($((SECONDS - t0)) s)"
    done
    wait "$pid" || rc=$?
    [ "$rc" != 0 ] || break
  done
  if [ "$rc" != 0 ]; then
    tail -n 15 "$SETUP_LOG" | sed 's/^/[setup]   | /' >&2
    die "$what failed (exit $rc; the lines above are the end of $SETUP_LOG)"
  fi
  [ $((SECONDS - t0)) -lt 10 ] || log "  done in $((SECONDS - t0)) s"
}

# runas USER CMD...: CMD as USER (from root: runuser; else sudo), in / with USER's runtime dir
runas() {
  local u=$1; shift
  if [ "$u" = "$(id -un)" ]; then "$@"; return; fi
  local env=(env "HOME=$(getent passwd "$u" | cut -d: -f6)" "XDG_RUNTIME_DIR=/run/user/$(id -u "$u")")
  if [ "$(id -u)" = 0 ]; then (cd / && runuser -u "$u" -- "${env[@]}" "$@")
  else (cd / && sudo -u "$u" "${env[@]}" "$@"); fi
}

# python3 -m venv needs ensurepip, which Debian ships in python3-venv (without it venv prints a
# "Failing command" block and exits 1)
ensure_venv_support() {
  python3 -c 'import ensurepip' 2>/dev/null || apt_install python3-venv python3-pip
}

need_apt_update=1
apt_update() { step "apt-get update" $SUDO apt-get update -qq; need_apt_update=0; }
apt_install() {
  [ "$need_apt_update" = 0 ] || apt_update
  step "installing $*${APT_FROM:+ $APT_FROM}" $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
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
have_buildx() { command -v docker >/dev/null 2>&1 && docker buildx version >/dev/null 2>&1; }
# Debian 13's docker.io has no CLI: it moved to docker-cli, which docker.io only Recommends (Debian
# changelog docker.io 26.1.4+dfsg1-7, bug #1035338). Name it wherever apt would install one.
docker_cli_pkg() {
  LC_ALL=C apt-cache policy docker-cli 2>/dev/null | awk '/Candidate:/ && $2 != "(none)" {print "docker-cli"}'
}

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
  local APT_FROM="from $PRETTY_NAME's own archive"  # one line for the step: apt_install says it
  # shellcheck disable=SC2046
  if have_engine; then apt_install docker-buildx $(docker_cli_pkg); else apt_install docker.io docker-buildx $(docker_cli_pkg); fi
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
    others=100; want=(-t "$next" docker.io docker-cli docker-buildx)
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
if ! command -v debootstrap >/dev/null; then
  log "debootstrap: builds the base images (debian:*-slim) here when no registry answers"
  apt_install debootstrap
fi

[ "$USE_DOCKER" = 0 ] || command -v docker >/dev/null \
  || die "dockerd is installed but there is no \`docker\` command: install the CLI (\`sudo apt-get install docker-cli\` on Debian 13, docker-ce-cli from Docker's repository)"

# 2. Start the engine when it is not answering. systemd is PID 1 when /run/systemd/system exists
#    (`systemctl is-system-running` also fails on a merely `degraded` system: one failed unit).
engine_answers() { $SUDO docker info >/dev/null 2>&1; }  # as root: is dockerd up at all?
if [ "$USE_DOCKER" = 1 ] && ! engine_answers; then
  if [ -d /run/systemd/system ]; then
    engine_log="\`sudo journalctl -u docker\`"
    log "starting docker.service (systemd)"
    $SUDO systemctl enable --now docker >/dev/null 2>&1 || $SUDO systemctl start docker || true
  else
    engine_log=/var/log/dockerd.log
    log "starting dockerd (no systemd; log: $engine_log)"
    $SUDO sh -c 'nohup dockerd >/var/log/dockerd.log 2>&1 &'
  fi
  for _ in $(seq 60); do engine_answers && break; sleep 1; done
  engine_answers || die "the Docker engine does not answer after 60 s ($($SUDO docker info 2>&1 >/dev/null | tail -n 1)); see $engine_log"
fi

# 2a. The user who runs `toolkit` needs the engine's socket: the docker group (from the next login on)
#     and, for this shell and the rest of the README's command line, an ACL on the socket itself
#     (the same access; the socket is made anew when dockerd restarts, by when the group is active).
if [ "$USE_DOCKER" = 1 ] && [ "$CALLER" != root ]; then
  getent group docker >/dev/null || $SUDO groupadd --system docker
  if ! id -nG "$CALLER" | tr ' ' '\n' | grep -qx docker; then
    $SUDO usermod -aG docker "$CALLER"
    log "added $CALLER to the docker group (active from the next login)"
  fi
  command -v setfacl >/dev/null || apt_install acl
  $SUDO setfacl -m "u:$CALLER:rw" "$(readlink -f /var/run/docker.sock)"
  log "until then this shell reaches the engine through an ACL on its socket (u:$CALLER:rw)"
  err=$(runas "$CALLER" docker info 2>&1 >/dev/null) \
    || die "the Docker engine runs but $CALLER cannot use it: ${err##*$'\n'}"
fi
[ "$USE_DOCKER" = 0 ] || log "docker $(docker version -f '{{.Server.Version}}'), buildx $(docker buildx version | awk 'NR == 1 { print ($2 == "" ? $1 : $2) }')"

# 2b. Podman (--podman, --test): the host release's own podman (Debian 12: 4.3.1, Debian 13: 5.4.2;
#     Debian 13's podman on Debian 12 would upgrade ~100 packages: openssl, systemd, glib, util-linux),
#     crun (the runtime that keeps a rootless user's groups: --group-add keep-groups), and for rootless
#     use uidmap (newuidmap), slirp4netns and fuse-overlayfs. Podman needs no daemon: the toolkit starts
#     `podman system service` (its Docker-compatible API) when it needs it.
#     Podman 5's rootless network is pasta (package passt: a Recommends of Debian 13's podman, which
#     --no-install-recommends leaves out): without it a build step in a network namespace of its own
#     (`toolkit reproduce --rebuild`) and any `podman run` without --network none fail "could not find
#     pasta". Podman 4 (Debian 12) uses slirp4netns.
rootless_net_packages() {  # $1: podman's major version; prints the package that gives its rootless network, if absent
  if [ "${1:-0}" -ge 5 ] && ! command -v pasta >/dev/null; then echo passt; fi
}
#     Rootful Podman's network of its own (a bridge, netavark) sets up its firewall with nft on Podman 5
#     (Debian 13's netavark 1.14: nftables, its Recommends, left out the same way) and iptables on Podman 4:
#     without it `toolkit reproduce --rebuild` as root failed "netavark: nftables error: unable to
#     execute nft: No such file or directory". Looked for in /usr/sbin too (a sudo user's PATH lacks it).
rootful_net_packages() {  # $1: podman's major version; prints the firewall package rootful Podman's network needs, if absent
  if [ "${1:-0}" -ge 5 ]; then PATH="$PATH:/usr/sbin:/sbin" command -v nft >/dev/null || echo nftables
  else PATH="$PATH:/usr/sbin:/sbin" command -v iptables >/dev/null || echo iptables; fi
}
if [ "$USE_PODMAN" = 1 ]; then
  case "$OS_ID" in debian|ubuntu) ;; *) command -v podman >/dev/null || die "not a Debian/Ubuntu host ($OS_ID): install podman and crun yourself" ;; esac
  if ! command -v podman >/dev/null || ! command -v crun >/dev/null || ! command -v newuidmap >/dev/null; then
    apt_install podman crun uidmap slirp4netns fuse-overlayfs
  fi
  # crun's own --version needs a runtime state dir (XDG_RUNTIME_DIR): a sudo user's first shell may have
  # none yet ("Failed to get state directory", no version); the package database always knows it
  log "$(podman --version), crun $(dpkg-query -W -f='${Version}' crun 2>/dev/null || crun --version 2>/dev/null | awk 'NR==1 {print $3}')"
  podman_major=$(podman --version 2>/dev/null | awk '{split($3, v, "."); print v[1] + 0}')
  net=$(rootless_net_packages "$podman_major")
  if [ -n "$net" ]; then
    case "$OS_ID" in
      debian|ubuntu) apt_install "$net" ;;
      *) log "warning: Podman $podman_major's rootless network needs pasta (package passt): install it" ;;
    esac
  fi
  firewall=$(rootful_net_packages "$podman_major")
  if [ -n "$firewall" ]; then
    case "$OS_ID" in
      debian|ubuntu) apt_install "$firewall" ;;
      *) log "warning: rootful Podman $podman_major's network needs the $firewall package's firewall tool: install it" ;;
    esac
  fi
  if [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" != cgroup2fs ] && [ "${podman_major:-0}" -ge 5 ]; then
    log "this host runs cgroup v1: Podman 5 warns that cgroups-v1 is deprecated on every command; harmless for the toolkit (toolkit doctor says how to move to v2); said once here, silenced for the rest of setup"
    export PODMAN_IGNORE_CGROUPSV1_WARNING=1  # Podman 5's own switch for that warning
    [ -z "$SUDO" ] || SUDO="sudo env PODMAN_IGNORE_CGROUPSV1_WARNING=1"  # sudo resets the environment
  fi
fi

# 3. Base images: use the local one, else pull, else build from this host's Debian mirror and tag it
#    with the upstream name so `FROM debian:trixie-slim` resolves locally without a registry.
#    Podman keeps its own store (root's, and one per rootless user): it gets the same image from
#    Docker's store (`docker save | podman load`), else pulled, else imported from the debootstrap
#    rootfs. A copy is kept in $BASE_DIR (docker-archive, world-readable): `toolkit build` on Podman
#    loads a base it lacks from there, so a rootless user's store gets it without a registry.
#    Every base is proven before it is called built: it runs `true` as root and `ls /` as nobody.
BASE_DIR=/var/cache/toolkit/base
ROOTFS_TAR=""; ROOTFS_SUITE=""
debootstrap_rootfs() {  # $1 suite -> ROOTFS_TAR: a rootfs tarball, made and kept by root in $BASE_DIR
  local suite=$1 mirror work
  [ "$ROOTFS_SUITE" != "$suite" ] || return 0
  mirror=$(debian_mirror)
  [ -n "$mirror" ] || die "no registry for debian:$suite-slim and no Debian mirror in this host's apt sources; set DEBIAN_MIRROR=<URL>"
  $SUDO mkdir -p "$BASE_DIR"
  work=$($SUDO mktemp -d "$BASE_DIR/rootfs.XXXXXX")
  TRIES=3 step "debian:$suite-slim cannot be pulled (${PULL_WHY:-no registry}): building it with debootstrap from this host's Debian mirror ($suite, minbase, $mirror; 1-3 min)" \
    $SUDO debootstrap --variant=minbase "$suite" "$work/root" "$mirror"
  # / of the image: 0755 (mktemp -d makes 0700; on vfs storage no non-root user could exec anything)
  $SUDO chmod 0755 "$work/root"
  step "packing the $suite rootfs" $SUDO tar --numeric-owner -C "$work/root" -cf "$work/rootfs.tar" .
  $SUDO rm -rf "$work/root"
  [ -z "$ROOTFS_TAR" ] || $SUDO rm -rf "$(dirname "$ROOTFS_TAR")"
  ROOTFS_TAR=$work/rootfs.tar; ROOTFS_SUITE=$suite
}
base_runs() {  # base_runs TAG ENGINE-COMMAND...: the image runs a command as root and as a non-root user
  local tag=$1; shift
  "$@" run --rm --network none "$tag" true >/dev/null 2>&1 \
    && "$@" run --rm --network none --user 65534:65534 "$tag" ls / >/dev/null 2>&1
}
base_error() {  # base_error TAG ENGINE-COMMAND...: why the image does not run (the engine's last line)
  local tag=$1 out; shift
  out=$("$@" run --rm --network none --user 65534:65534 "$tag" ls / 2>&1 >/dev/null || true)
  printf '%s' "${out##*$'\n'}"
}
# ensure_base_in TAG SUITE REF docker|podman [prove]: REF in that engine's store (as root); with
# `prove`, one that cannot run a command is made anew, and the new one must run. (Podman's bases are
# proven after 3b has mended the host: before, no container of any image may start.)
ensure_base_in() {
  local tag=$1 suite=$2 ref=$3 engine=$4 prove=${5:-} cmd
  read -r -a cmd <<<"$SUDO $engine"
  if "${cmd[@]}" image inspect "$ref" >/dev/null 2>&1; then
    [ -n "$prove" ] || return 0
    base_runs "$ref" "${cmd[@]}" && return 0
    log "$ref is in the $engine store but cannot run a command ($(base_error "$ref" "${cmd[@]}")): making it anew"
    "${cmd[@]}" rmi -f "$ref" >/dev/null 2>&1 || true
  fi
  if [ "$engine" = podman ] && [ "$USE_DOCKER" = 1 ] && base_runs "$tag" $SUDO docker; then
    $SUDO docker save "$tag" | "${cmd[@]}" load -q >/dev/null
    log "$tag: Docker's image loaded into Podman's store"
  elif PULL_WHY=$(timeout 60 "${cmd[@]}" pull -q "$ref" 2>&1 >/dev/null); then log "pulled $ref ($engine)"
  else
    # what the registry said, in one short line: the end of its last line that is not a warning (Podman
    # 5 puts its cgroup-v1 warning first; the cause, "no such host", ends the line); a timeout says nothing
    PULL_WHY=$(printf '%s\n' "$PULL_WHY" | { grep -v -i -e 'level=warning' -e '^WARN' || true; } | awk 'NF {l = $0} END {print (length(l) > 160 ? "..." substr(l, length(l) - 156) : l)}')
    PULL_WHY=${PULL_WHY:-no answer in 60 s}
    debootstrap_rootfs "$suite"
    # podman prints its copy progress on stderr: kept out of sight, shown only when the import fails
    if ! err=$("${cmd[@]}" import -c 'CMD ["bash"]' "$ROOTFS_TAR" "$ref" 2>&1 >/dev/null); then
      die "importing $ROOTFS_TAR as $ref failed ($engine): $(printf '%s\n' "$err" | tail -n 3)"
    fi
    log "$ref: imported from the debootstrap rootfs ($engine)"
  fi
  [ -z "$prove" ] || base_runs "$ref" "${cmd[@]}" \
    || die "$ref was made but cannot run a command ($engine): $(base_error "$ref" "${cmd[@]}")"
  BASE_CHANGED=1
}
ensure_debian_base() {
  local tag=$1 suite=$2 archive
  archive="$BASE_DIR/$(printf '%s' "$tag" | tr '/:' '__').tar"
  BASE_CHANGED=0
  if [ "$USE_DOCKER" = 1 ]; then ensure_base_in "$tag" "$suite" "$tag" docker prove; fi
  if [ "$USE_PODMAN" = 1 ]; then
    ensure_base_in "$tag" "$suite" "docker.io/library/$tag" podman "${PODMAN_MENDED:-}"
    if [ ! -s "$archive" ] || [ "$BASE_CHANGED" = 1 ]; then
      $SUDO mkdir -p "$BASE_DIR"
      $SUDO rm -f "$archive.part"
      $SUDO podman save -q --format docker-archive -o "$archive.part" "docker.io/library/$tag"
      $SUDO mv "$archive.part" "$archive" && $SUDO chmod 0644 "$archive"
      log "$tag: kept for rootless Podman stores in $archive"
    fi
  fi
}
ensure_debian_base debian:trixie-slim trixie
# the vLLM CPU image (tests) uses bookworm: Python 3.11 matches the torch CPU wheel (cp311)
if [ "$TEST" = 1 ]; then ensure_debian_base debian:bookworm-slim bookworm; fi

# 3b. Podman: prove that a container starts AND that a build runs a RUN step (Podman 5 clamps rlimits
#     for `podman run` but buildah does not for `podman build`), and mend the host conditions that stop
#     either, each at most once, in whatever order they appear, until both pass or an unknown error
#     remains:
#     - crun: "cgroups in hybrid mode not supported, drop all controllers from cgroupv2": a cgroup v1
#       host whose cgroup2 mount still holds a controller (e.g. hugetlb) that no v1 hierarchy has;
#       mounting it as a v1 hierarchy (what crun asks; not kept over a reboot) empties the cgroup2 one;
#     - "setrlimit `RLIMIT_NOFILE`: Operation not permitted": root without CAP_SYS_RESOURCE cannot
#       raise rlimits, and Podman gives containers nofile=1048576 unless told; a containers.conf
#       drop-in then sets limits this host allows (buildah reads the same default_ulimits).
#     On a fresh VM of CI's kind the setrlimit error comes first and the hybrid one only after it.
PROBE_CTX=""
podman_probe() {  # podman_probe PODMAN-COMMAND...: "" when a container and a build RUN step work, else the error
  local out
  if [ -z "$PROBE_CTX" ]; then
    PROBE_CTX=$(mktemp -d); chmod 0755 "$PROBE_CTX"
    printf 'FROM docker.io/library/debian:trixie-slim\nRUN true\n' >"$PROBE_CTX/Dockerfile"; chmod 0644 "$PROBE_CTX/Dockerfile"
  fi
  out=$("$@" run --rm --network none docker.io/library/debian:trixie-slim true 2>&1) \
    && out=$("$@" build -q --no-cache --network host -t localhost/toolkit-setup-probe "$PROBE_CTX" 2>&1) \
    && { "$@" rmi -f localhost/toolkit-setup-probe >/dev/null 2>&1 || true; return 0; }
  printf '%s' "$out"
}
MENDED=""
mend_podman() {  # mend_podman WHO PODMAN-COMMAND...
  local who=$1 out conf=/etc/containers/containers.conf.d/50-toolkit-rlimits.conf; shift
  for _ in 1 2 3; do
    out=$(podman_probe "$@")
    [ -n "$out" ] || return 0
    if [[ $out == *'cgroups in hybrid mode not supported'* && $MENDED != *hybrid* ]]; then
      MENDED+=" hybrid"
      for c in $(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null); do
        log "crun refuses hybrid cgroups: mounting the $c controller as a cgroup v1 hierarchy (/sys/fs/cgroup/$c)"
        $SUDO mkdir -p "/sys/fs/cgroup/$c" && $SUDO mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c"
      done
    elif [[ $out == *setrlimit* && $MENDED != *rlimit* ]]; then
      MENDED+=" rlimit"
      $SUDO mkdir -p "$(dirname "$conf")"
      for nproc in "$(ulimit -Hu)" 32768 4096; do  # Podman itself may run under a lower nproc than this shell
        printf '# written by scripts/setup-host.sh: root cannot raise rlimits on this host (no CAP_SYS_RESOURCE)\n[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n' \
          "$(ulimit -Hn)" "$(ulimit -Hn)" "$nproc" "$nproc" | $SUDO tee "$conf" >/dev/null
        [ -n "$(podman_probe "$@")" ] || break
      done
      log "root cannot raise rlimits here (no CAP_SYS_RESOURCE): wrote $conf, which sets the containers' limits ($(grep default_ulimits "$conf")); nothing more to do"
    else
      die "podman ($who) cannot run a container or a build RUN step on this host: $out"
    fi
  done
  out=$(podman_probe "$@")
  [ -z "$out" ] || die "podman ($who) cannot run a container or a build RUN step on this host: $out"
}

# rootless_podman USER: USER's own Podman store works: a /etc/subuid + /etc/subgid range, a runtime
# dir, the native overlay driver when the store is new and the kernel allows it (vfs copies every
# layer: ~3.5x the disk), the base image loaded from $BASE_DIR, a container and a build RUN step.
rootless_podman() {
  local u=$1 uid home next
  uid=$(id -u "$u"); home=$(getent passwd "$u" | cut -d: -f6)
  for f in /etc/subuid /etc/subgid; do
    if ! grep -q "^$u:" "$f" 2>/dev/null; then
      next=$(awk -F: 'BEGIN {m = 100000} {if ($2 + $3 > m) m = $2 + $3} END {print m}' "$f" 2>/dev/null || echo 100000)
      printf '%s:%s:65536\n' "$u" "$next" | $SUDO tee -a "$f" >/dev/null
      log "$f: $u gets subordinate IDs $next-$((next + 65535)) (rootless Podman)"
    fi
  done
  [ -d "/run/user/$uid" ] || $SUDO install -d -m 0700 -o "$u" -g "$(id -g "$u")" "/run/user/$uid"
  if [ ! -e "$home/.config/containers/storage.conf" ] && [ ! -d "$home/.local/share/containers/storage" ]; then
    $SUDO install -d -o "$u" -g "$(id -g "$u")" "$home/.config" "$home/.config/containers"
    printf '[storage]\ndriver = "overlay"\n' | $SUDO tee "$home/.config/containers/storage.conf" >/dev/null
    $SUDO chown "$u:" "$home/.config/containers/storage.conf"
    if ! runas "$u" podman info >/dev/null 2>&1; then
      $SUDO rm -f "$home/.config/containers/storage.conf"
      log "rootless Podman ($u): this kernel refuses native overlay; Podman uses vfs (every layer a full copy: ~3.5x the disk)"
    fi
  fi
  runas "$u" podman image exists docker.io/library/debian:trixie-slim \
    || runas "$u" podman load -q -i "$BASE_DIR/debian_trixie-slim.tar" >/dev/null
  mend_podman "rootless, as $u" runas "$u" podman
  log "rootless podman runs containers and builds (user $u, storage $(runas "$u" podman info --format '{{.Store.GraphDriverName}}'))"
}

if [ "$USE_PODMAN" = 1 ]; then
  mend_podman "rootful, as root" $SUDO podman
  PODMAN_MENDED=prove  # now prove Podman's bases run (and remake one that does not)
  ensure_debian_base debian:trixie-slim trixie
  if [ "$TEST" = 1 ]; then ensure_debian_base debian:bookworm-slim bookworm; fi
  log "podman runs containers and builds (rootful)"
  # a non-root caller of --podman runs toolkit rootless: their own store must work too
  if [ "$PODMAN" = 1 ] && [ "$CALLER" != root ]; then rootless_podman "$CALLER"; fi
fi

# 3c. --test: a rootless Podman user for the e2e tests (tests/test_e2e_podman.py): toolkit-podman with
#     its own store (rootless_podman) and a group standing in for render/video (the keep-groups test
#     gives a device node to it alone), and a Python venv with the toolkit's dependencies that it can
#     read (the tests put the checkout's code first on PYTHONPATH).
PODMAN_USER=toolkit-podman
if [ "$TEST" = 1 ]; then
  id "$PODMAN_USER" >/dev/null 2>&1 || $SUDO useradd --create-home --shell /bin/bash "$PODMAN_USER"
  getent group toolkit-gpu-test >/dev/null || $SUDO groupadd toolkit-gpu-test
  id -nG "$PODMAN_USER" | grep -qw toolkit-gpu-test || $SUDO usermod -aG toolkit-gpu-test "$PODMAN_USER"
  rootless_podman "$PODMAN_USER"
  out=$(runas "$PODMAN_USER" podman run --rm --network none --group-add keep-groups docker.io/library/debian:trixie-slim true 2>&1) \
    || die "rootless podman (user $PODMAN_USER) cannot keep its groups in a container: $out"
  venv=/opt/toolkit-test/venv
  if ! "$venv/bin/python" -c 'import docker, click, pydantic, jinja2, gguf' 2>/dev/null; then
    ensure_venv_support
    $SUDO /usr/bin/python3 -m venv "$venv" >/dev/null
    step "installing the toolkit's dependencies into $venv (for the rootless test user)" $SUDO "$venv/bin/pip" install -q .
  fi
fi
[ -z "$PROBE_CTX" ] || rm -rf "$PROBE_CTX"
[ -z "$ROOTFS_TAR" ] || $SUDO rm -rf "$(dirname "$ROOTFS_TAR")"

# 3d. --test: what the test levels need besides Python packages: gcc (fast), cmake (contract), and the
#     torch CPU wheel the vLLM CPU image installs (e2e); shellcheck (the scripts' own test); chromium (the
#     report's browser test, e2e). PyPI has no `+cpu` builds: the wheel comes
#     from pip's find-links when it is already on disk, else from PyTorch's CPU index
#     ($TOOLKIT_TORCH_INDEX, default https://download.pytorch.org/whl/cpu) into $WHEEL_DIR.
TORCH_CPU=2.13.0+cpu  # = tests/support/contract_env.py TORCH_CPU (tests/test_setup_host.py checks)
WHEEL_DIR=/var/cache/toolkit/wheels
if [ "$TEST" = 1 ]; then
  # gcc only Recommends libc6-dev (crt1.o, crti.o): without it nothing links ("cannot find Scrt1.o")
  # chromium: the html report's browser test (tests/test_report_browser.py, headless)
  TEST_PKGS=(gcc libc6-dev cmake shellcheck chromium)
  if ! command -v gcc >/dev/null || ! command -v cmake >/dev/null || ! command -v shellcheck >/dev/null \
    || ! command -v chromium >/dev/null \
    || ! dpkg -s libc6-dev >/dev/null 2>&1; then
    # on a mixed bookworm/trixie host libc6-dev must match trixie's libc6: take the target apt can satisfy
    [ "$need_apt_update" = 0 ] || apt_update
    if LC_ALL=C apt-get -s install --no-install-recommends "${TEST_PKGS[@]}" >/dev/null 2>&1; then apt_install "${TEST_PKGS[@]}"
    else apt_install -t trixie "${TEST_PKGS[@]}"; fi
  fi
  # cp311: the vLLM CPU image (bookworm's Python); this host's Python: the contract levels' venvs
  pys=(311); hostpy=$(python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
  [ "$hostpy" = 311 ] || pys+=("$hostpy")
  for py in "${pys[@]}"; do
    wheel="torch-$TORCH_CPU-cp$py-cp$py-manylinux_2_28_x86_64.whl"
    have=""
    for d in ${TOOLKIT_TORCH_WHEELS:-} ${PIP_FIND_LINKS:-} $(python3 -m pip config get global.find-links 2>/dev/null || true) "$WHEEL_DIR"; do
      d=${d#file://}
      if [ -f "$d/$wheel" ]; then have=$d; break; fi
    done
    if [ -z "$have" ]; then
      index=${TOOLKIT_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
      $SUDO mkdir -p "$WHEEL_DIR"
      TRIES=2 step "downloading torch $TORCH_CPU (cp$py, ~190 MB) from $index into $WHEEL_DIR (the test levels' CPU torch; offline: put $wheel there yourself)" \
        $SUDO python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" \
        --platform manylinux_2_28_x86_64 --implementation cp --abi "cp$py" --index-url "$index" -d "$WHEEL_DIR" "torch==$TORCH_CPU"
      [ -f "$WHEEL_DIR/$wheel" ] || die "pip did not download $wheel from $index; put that file in $WHEEL_DIR (or set TOOLKIT_TORCH_WHEELS=<folder>)"
      have=$WHEEL_DIR
    fi
    log "torch CPU wheel: $have/$wheel"
  done
fi

# 4. The toolkit itself (editable, with test extras when asked). A distribution Python that is
#    "externally managed" (PEP 668, Debian 12+/Ubuntu 23.04+) gets a .venv here, linked onto PATH.
extras=""; [ "$TEST" = 1 ] && extras="[test]"
PY=python3
if [ -x .venv/bin/python ] || python3 -c 'import os,sys,sysconfig; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'; then
  if [ ! -x .venv/bin/python ]; then ensure_venv_support; python3 -m venv .venv >/dev/null; fi
  PY=.venv/bin/python
  $SUDO ln -sf "$PWD/.venv/bin/toolkit" /usr/local/bin/toolkit
fi
step "pip install -e .${extras} (the toolkit; 1-3 min the first time, seconds after)" $PY -m pip install -q -e ".${extras}"
if [ -n "${RETRIED:-}" ]; then log "a step needed a second try: its output is kept in $SETUP_LOG"; else rm -f "$SETUP_LOG"; fi
if [ "$USE_DOCKER" = 1 ] && [ "$CALLER" != root ] && ! id -nG | tr ' ' '\n' | grep -qx docker; then
  log "ready. $CALLER is in the docker group from the next login; until then this shell reaches the engine through an ACL on its socket. Run 'toolkit doctor' to see what this host can run"
else
  log "ready: run 'toolkit doctor' to see what this host can run"
fi
