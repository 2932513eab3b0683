#!/usr/bin/env bash
# Prove the README's commands on fresh hosts. Each host is stood in for by a privileged container
# that hides nothing of this machine: systemd as PID 1, its own empty engine stores (/var/lib/docker,
# /var/lib/containers), /tmp and /home on real disk (named volumes), its own bridge network (never
# the host's docker0), pid_max 32768 in its own PID namespace and no CAP_SYS_RESOURCE (as on a fresh
# VM of CI's kind), only what a fresh cloud Debian has (systemd, dbus, ca-certificates, git, sudo,
# python3, procps, iproute2, kmod, less; a user `debian` with passwordless sudo), no pip
# configuration, no wheels, no caches, and the project as a git bundle of HEAD (commit first).
# Each host runs the README's command lines exactly as written (read from README.md), in ONE login
# shell of the user (`su - USER`: a non-root user gets Debian's user PATH, without /usr/sbin), under a
# pseudo-terminal (`script`); every step is timed by wall clock and by the stand-in's CPU seconds.
#
#   scripts/fresh-host.sh [--quick] [--keep] [--out DIR] [HOST...]
#
# Needs root: it starts privileged containers. Run it as root, or from a user with sudo as `sudo
# scripts/fresh-host.sh ...`; as any other user it stops at once (exit 4, `run as root`).
#
#   HOST     RELEASE:USER:ENGINE[:FLAG...] (RELEASE bookworm|trixie, USER root|debian, ENGINE
#            docker|podman): the README's main job (setup, build, bench) on that host, then `toolkit
#            doctor`; FLAG fresh-cgroups: hand the host's cgroup v1 controllers that setup mounted back
#            to cgroup2 first (as a fresh boot of CI's VM kind has them); setup-only: only the line's
#            first command (setup-host.sh), then doctor; no-systemd: PID 1 is no init at all (CI's VM
#            kind: nothing mounts the cgroup v1 controllers systemd would);
#            RELEASE:test: the README's test command as root. Default: every README host (8) and
#            the test command on both releases (a full run: ~3-4 h on 2 cores; one at a time, since
#            under cgroup v1 a stand-in weighs like one task of the root cgroup).
#   --quick  what CI runs: trixie:debian:docker (the README's main job as a sudo user on Debian 13)
#            and bookworm:root:podman:fresh-cgroups:setup-only:no-systemd (setup's hybrid-cgroup and
#            rlimit mends on a stand-in of a fresh VM of CI's kind, proven by a container and a build RUN
#            step).
#   --keep   leave the stand-ins (containers and volumes) for a look; default: removed. A later run
#            refuses (exit 9) while a stand-in of a host it names is still there: remove it first.
#   --out    where logs and table.md go (default /tmp/fresh-host).
#
# The network: this workplace reaches PyPI through a TLS proxy whose CA this host trusts
# (/usr/local/share/ca-certificates/*.crt); a stand-in trusts the same CAs, as any host on this
# network must. Nothing else of this host goes in.
# The test command's torch CPU wheel: PyTorch's CPU index is stood in for by a file index holding the
# one wheel this machine carries (TOOLKIT_TORCH_INDEX; scripts/setup-host.sh --test downloads from it).
# Needs: a running Docker engine and the local debian:bookworm-slim / debian:trixie-slim images
# (./scripts/setup-host.sh --test). Exit status: 0 when every step of every host exited 0, 1 when one
# did not, 4 for bad arguments, 9 when another run holds /run/lock/toolkit-fresh-host.lock or a stand-in
# of a named host is still there (kept by an earlier --keep run: named, never removed), 130 when
# stopped (the stand-in it was running is removed then, unless --keep).
{ # the whole script is one compound command: bash reads it all before running (an edit while it runs is harmless)
set -euo pipefail
shopt -s inherit_errexit
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=/tmp/fresh-host; KEEP=0; QUICK=0; HOSTS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --keep) KEEP=1 ;;
    --out)
      [ $# -ge 2 ] && [ -n "$2" ] && [ "${2#-}" = "$2" ] || { echo "fresh-host.sh: --out needs a folder (--help)" >&2; exit 4; }
      OUT=$2; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    -*) echo "fresh-host.sh: unknown option '$1' (--help)" >&2; exit 4 ;;
    *) HOSTS+=("$1") ;;
  esac
  shift
done
if [ "$QUICK" = 1 ] && [ ${#HOSTS[@]} != 0 ]; then
  echo "fresh-host.sh: --quick runs its own hosts; name hosts or --quick, not both (--help)" >&2; exit 4
elif [ "$QUICK" = 1 ]; then HOSTS=(trixie:debian:docker bookworm:root:podman:fresh-cgroups:setup-only:no-systemd)
elif [ ${#HOSTS[@]} = 0 ]; then
  for r in bookworm trixie; do for u in root debian; do for e in docker podman; do HOSTS+=("$r:$u:$e"); done; done; done
  HOSTS+=(bookworm:test trixie:test)
fi
say() { printf '[fresh-host %s] %s\n' "$(date +%T)" "$*" >&2; }
for h in "${HOSTS[@]}"; do
  [[ $h =~ ^(bookworm|trixie):((root|debian):(docker|podman)(:(fresh-cgroups|setup-only|no-systemd))*|test)$ ]] \
    || { echo "fresh-host.sh: bad host '$h' (RELEASE:USER:ENGINE[:FLAG...] or RELEASE:test; --help)" >&2; exit 4; }
done
[ "$(id -u)" = 0 ] || { echo "fresh-host.sh: run as root (privileged containers)" >&2; exit 4; }
docker info >/dev/null 2>&1 || { echo "fresh-host.sh: no Docker engine answering: run ./scripts/setup-host.sh --test" >&2; exit 4; }
# one run at a time: a second run would remove the first one's stand-ins (same names) and share its 2 cores
exec 9>/run/lock/toolkit-fresh-host.lock
flock -w 20 9 || { echo "fresh-host.sh: another fresh-host.sh run is in progress (/run/lock/toolkit-fresh-host.lock): wait for it" >&2; exit 9; }

# a stand-in of the same name left by an earlier --keep run (this user's or another's, which the lock no
# longer guards once that run ended) is someone's to look at: never removed without a word
for h in "${HOSTS[@]}"; do
  n=toolkit-fresh-${h//:/-}
  if docker container inspect "$n" >/dev/null 2>&1; then
    echo "fresh-host.sh: a stand-in named $n is there (kept by an earlier --keep run, perhaps another user's): look at it or remove it with \`docker rm -f $n && docker volume rm $n-docker $n-containers $n-tmp $n-home\`, then run again" >&2
    exit 9
  fi
done

[ ! -e "$OUT" ] || [ -d "$OUT" ] || { echo "fresh-host.sh: --out $OUT exists and is not a folder" >&2; exit 4; }
mkdir -p "$OUT" || { echo "fresh-host.sh: cannot make --out $OUT" >&2; exit 4; }
OUT=$(cd "$OUT" && pwd)  # absolute: the bundle and logs are written from other folders
TORCH_WHEEL=""
for d in ${TOOLKIT_TORCH_WHEELS:-} ${PIP_FIND_LINKS:-} /var/cache/toolkit/wheels; do
  f=$(ls "$d"/torch-*+cpu-cp311-*.whl 2>/dev/null | head -1 || true)
  [ -z "$f" ] || { TORCH_WHEEL=$f; break; }
done

# The README's command lines: the main job (Docker), the Podman one, the test command.
readme_line() { grep -m1 -E "$1" "$ROOT/README.md"; }
MAIN=$(readme_line '^\./scripts/setup-host\.sh && toolkit build && toolkit bench$')
PODMAN=$(readme_line '^\./scripts/setup-host\.sh --podman && ')
TESTS=$(readme_line '^\./scripts/setup-host\.sh --test ')

# One stand-in image per release: what a fresh cloud Debian has, nothing of this machine's.
stand_in_image() {  # $1 release
  local rel=$1 ctx
  ctx=$(mktemp -d)
  cat >"$ctx/init" <<'EOF'
#!/bin/sh
# a fresh VM of CI's kind: pid_max 32768 (per PID namespace since Linux 6.14; containers/common derives
# the default nproc limit from it; systemd's own 50-pid-max.conf, which would raise it to 4194304, is
# masked: that VM's PID 1 is not systemd) and no CAP_SYS_RESOURCE for anyone, root included
echo 32768 > /proc/sys/kernel/pid_max 2>/dev/null || true
# FRESH_INIT=none: no systemd at all, as on CI's VM kind (nothing mounts the cgroup v1 controllers that
# crun then finds left in cgroup2)
if [ "${FRESH_INIT:-systemd}" = none ]; then
  # the VM's boot mounts cgroup2 at /sys/fs/cgroup/unified beside the v1 hierarchies (runc does not)
  if [ -d /sys/fs/cgroup/cpu ] && ! [ -e /sys/fs/cgroup/unified/cgroup.controllers ]; then
    mkdir -p /sys/fs/cgroup/unified && mount -t cgroup2 none /sys/fs/cgroup/unified 2>/dev/null || true
  fi
  exec setpriv --bounding-set -sys_resource --inh-caps -sys_resource -- sleep infinity
fi
exec setpriv --bounding-set -sys_resource --inh-caps -sys_resource -- /sbin/init
EOF
  cat >"$ctx/Dockerfile" <<EOF
FROM debian:$rel-slim
RUN rm -f /etc/apt/sources.list /etc/apt/sources.list.d/* \\
    && printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: $rel $rel-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: http://deb.debian.org/debian-security\nSuites: $rel-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > /etc/apt/sources.list.d/debian.sources \\
    && apt-get update -qq \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd systemd-sysv dbus ca-certificates git sudo python3 procps iproute2 kmod less >/dev/null \\
    && apt-get clean && rm -rf /var/lib/apt/lists/* \\
    && useradd --create-home --shell /bin/bash --groups adm,sudo,video,plugdev debian \\
    && echo 'debian ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/90-cloud-init-users \\
    && ln -s /dev/null /etc/sysctl.d/50-pid-max.conf
COPY init /usr/local/sbin/fresh-init
COPY ca/ /usr/local/share/ca-certificates/
RUN chmod 0755 /usr/local/sbin/fresh-init && update-ca-certificates >/dev/null
STOPSIGNAL SIGRTMIN+3
CMD ["/usr/local/sbin/fresh-init"]
EOF
  mkdir "$ctx/ca"
  cp /usr/local/share/ca-certificates/*.crt "$ctx/ca/" 2>/dev/null || true
  docker build -q -t "toolkit-fresh-host:$rel" "$ctx" >/dev/null
  rm -rf "$ctx"
}

# The host's cgroup v1 controllers mounted by setup-host.sh's hybrid mend (hugetlb on CI's VM kind)
# are handed back to cgroup2 for a fresh-cgroups host, as a fresh boot has them, and mounted again after.
REMOUNT=()
cgroups_fresh() {
  local c
  for c in hugetlb misc rdma; do
    # empty child cgroups keep the hierarchy (and the controller) after the unmount; busy ones stay
    [ ! -d "/sys/fs/cgroup/$c" ] || find "/sys/fs/cgroup/$c" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || true
    if mountpoint -q "/sys/fs/cgroup/$c" && [ -d /sys/fs/cgroup/unified ] && umount "/sys/fs/cgroup/$c" 2>/dev/null; then
      REMOUNT+=("$c")
      if grep -qw "$c" /sys/fs/cgroup/unified/cgroup.controllers; then say "host: cgroup v1 $c unmounted (back in cgroup2, as on a fresh boot)"
      else say "host: cgroup v1 $c unmounted, but another mount namespace (e.g. rootless Podman's pause process) still holds it: the hybrid-cgroup path cannot be shown now"; fi
    fi
  done
}
cgroups_back() {
  local c
  for c in "${REMOUNT[@]}"; do mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c" 2>/dev/null || true; done
  REMOUNT=()
}

BUNDLE=$OUT/toolkit.bundle
err=$(git -C "$ROOT" bundle create "$BUNDLE" HEAD 2>&1) || { echo "fresh-host.sh: git bundle of HEAD failed: $err" >&2; exit 4; }
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD)
docker network inspect toolkit-fresh-host >/dev/null 2>&1 || docker network create toolkit-fresh-host >/dev/null
TABLE=$OUT/table.md
printf '| host | user | engine | step | exit | wall s | CPU s | load (1 min) |\n|---|---|---|---|---|---|---|---|\n' >"$TABLE"
FAILED=0

cpu_of() {  # CPU seconds of the stand-in's cgroup so far (cgroup v1 cpuacct or v2 cpu.stat)
  local id=$1 pid path
  pid=$(docker inspect -f '{{.State.Pid}}' "$id" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ "$pid" != 0 ] && [ -r "/proc/$pid/cgroup" ] || return 1  # gone: never the host's root cgroup
  if [ -r /sys/fs/cgroup/cpuacct/cpuacct.usage ]; then
    path=$(awk -F: '$2 ~ /(^|,)cpuacct(,|$)/ {print $3}' "/proc/$pid/cgroup")
    [ -n "$path" ] && [ "$path" != / ] || return 1
    awk '{printf "%.0f", $1 / 1e9}' "/sys/fs/cgroup/cpuacct$path/cpuacct.usage"
  else
    path=$(awk -F: '$1 == "0" {print $3}' "/proc/$pid/cgroup")
    awk '$1 == "usage_usec" {printf "%.0f", $2 / 1e6}' "/sys/fs/cgroup$path/cpu.stat"
  fi
}

sample() {  # sample ID FILE: append "unix-time cgroup-CPU-seconds load-1min" while the stand-in exists
  local c
  c=$(cpu_of "$1" 2>/dev/null) || return 0
  printf '%s %s %s\n' "$(date +%s)" "$c" "$(cut -d' ' -f1 /proc/loadavg)" >>"$2"
}

run_host() {  # $1 RELEASE:USER:ENGINE[:fresh-cgroups] | RELEASE:test
  local spec=$1 rel user engine line name rc id flags=""
  IFS=: read -r rel user engine flags <<<"$spec"
  case "$user" in
    test) user=root; engine=docker; line=$TESTS ;;
    root|debian) case "$engine" in docker) line=$MAIN ;; podman) line=$PODMAN ;; *) echo "bad host $spec" >&2; exit 4 ;; esac ;;
    *) echo "bad host '$spec' (RELEASE:USER:ENGINE or RELEASE:test; --help)" >&2; exit 4 ;;
  esac
  name=toolkit-fresh-${spec//:/-}
  docker rm -f "$name" >/dev/null 2>&1 || true
  for v in docker containers tmp home; do docker volume rm -f "$name-$v" >/dev/null 2>&1 || true; done
  stand_in_image "$rel"
  [[ ":$flags:" != *:fresh-cgroups:* ]] || cgroups_fresh
  [[ ":$flags:" != *:setup-only:* ]] || line=${line%% && *}
  CURRENT=$name
  local init=systemd
  [[ ":$flags:" != *:no-systemd:* ]] || init=none
  id=$(docker run -d --name "$name" --hostname "${name:0:60}" --privileged --cgroupns=private -e "FRESH_INIT=$init" \
    --tmpfs /run --tmpfs /run/lock --network toolkit-fresh-host \
    -v "$name-docker:/var/lib/docker" -v "$name-containers:/var/lib/containers" \
    -v "$name-tmp:/tmp" -v "$name-home:/home" "toolkit-fresh-host:$rel")
  [ "$init" = none ] || for _ in $(seq 60); do docker exec "$id" test -d /run/systemd/system 2>/dev/null && break; sleep 1; done
  # a fresh Debian's /dev/net/tun is 0666 (systemd-udev's 50-udev-default.rules: static_node=tun); the
  # stand-in's /dev is its own tmpfs holding this machine's nodes and modes (0600 here), and rootless
  # Podman 5's network (pasta) opens the node as the user: set as a fresh host has it, in the stand-in only
  docker exec "$id" sh -c '[ ! -c /dev/net/tun ] || chmod 0666 /dev/net/tun'
  docker exec "$id" mkdir -p /srv/fresh
  docker cp "$BUNDLE" "$id:/srv/fresh/toolkit.bundle" >/dev/null
  if [ "${spec#*:}" = test ] && [ -n "$TORCH_WHEEL" ]; then  # PyTorch's CPU index, stood in for by a file index
    docker exec "$id" mkdir -p /srv/torch-index/simple/torch
    docker cp "$TORCH_WHEEL" "$id:/srv/torch-index/simple/torch/" >/dev/null
    docker exec "$id" sh -c "cd /srv/torch-index/simple/torch && printf '<a href=\"%s\">%s</a>\n' $(basename "$TORCH_WHEEL") $(basename "$TORCH_WHEEL") > index.html"
  fi
  docker exec "$id" sh -c "chmod -R a+rX /srv; su - $user -c 'git -c advice.detachedHead=false -c init.defaultBranch=main clone -q /srv/fresh/toolkit.bundle ~/toolkit'"
  # the README's line, in one login shell, each `&&` step wrapped to be timed (wall by the clock,
  # CPU by the cgroup): `step N CMD` runs CMD as written and marks its start and end
  local chain="" s i=0
  while IFS= read -r s; do
    i=$((i + 1)); chain+="${chain:+ && }step $i $s"
  done < <(printf '%s\n' "$line" | sed 's/ && /\n/g')
  [ "${spec#*:}" = test ] || chain+="; step 9 toolkit doctor"
  docker exec -i "$id" sh -c 'cat > /srv/fresh/run.sh; touch /srv/fresh/marks; chmod 0644 /srv/fresh/run.sh; chmod 0666 /srv/fresh/marks' <<EOF
mark() { echo "\$1 \$2 \$(date +%s) \${3:-}" >> /srv/fresh/marks; }
step() { local n=\$1 rc=0; shift; mark "\$n" start; "\$@" || rc=\$?; mark "\$n" end "\$rc"; return "\$rc"; }
cd ~/toolkit && $chain
EOF
  say "$spec: $line"
  (
    while [ "$(docker inspect -f '{{.State.Running}}' "$id" 2>/dev/null)" = true ]; do
      sample "$id" "$OUT/$name.cpu"
      sleep 5
    done
  ) 9>&- &  # the sampler may outlive this run by a few seconds: it must not hold the run's lock
  local sampler=$!
  local env="TOOLKIT_FRESH_HOST=1"
  [ "${spec#*:}" != test ] || env+=" TOOLKIT_TORCH_INDEX=file:///srv/torch-index/simple"
  rc=0
  timeout 14400 docker exec -e TERM=xterm "$id" script -qefc "su - $user -c 'export $env; bash /srv/fresh/run.sh'" /srv/fresh/typescript >/dev/null 2>&1 || rc=$?
  docker cp "$id:/srv/fresh/typescript" "$OUT/$name.log" >/dev/null 2>&1 || true
  docker cp "$id:/srv/fresh/marks" "$OUT/$name.marks" >/dev/null 2>&1 || true
  kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true
  sample "$id" "$OUT/$name.cpu"
  # one table row per step: the marks give wall; the sampled cgroup CPU nearest each mark gives CPU
  local names=() n
  while IFS= read -r s; do names+=("$s"); done < <(printf '%s\n' "$line" | sed 's/ && /\n/g')
  names[8]="toolkit doctor"
  for n in 1 2 3 9; do
    local st en src
    st=$(awk -v n=$n '$1 == n && $2 == "start" {print $3}' "$OUT/$name.marks" 2>/dev/null)
    [ -n "$st" ] || continue
    read -r en src < <(awk -v n=$n '$1 == n && $2 == "end" {print $3, $4}' "$OUT/$name.marks") || { en=$(date +%s); src="killed"; }
    local c0 c1 ld
    # the cgroup's CPU at the first sample from each mark on (the last sample when the stand-in went first)
    c0=$(awk -v t="$st" '$1 >= t {print $2; exit}' "$OUT/$name.cpu"); c1=$(awk -v t="$en" '$1 >= t {v = $2; exit} {v = $2} END {print v}' "$OUT/$name.cpu")
    ld=$(awk -v a="$st" -v b="$en" '$1 >= a && $1 <= b {s += $3; k++} END {if (k) printf "%.1f", s / k; else print "-"}' "$OUT/$name.cpu")
    printf '| Debian %s | %s | %s | `%s` | %s | %s | %s | %s |\n' "$([ "$rel" = bookworm ] && echo 12 || echo 13)" \
      "$user" "$engine" "${names[$((n - 1))]}" "$src" "$((en - st))" "$(( ${c1:-0} - ${c0:-0} ))" "$ld" >>"$TABLE"
    [ "$src" = 0 ] || FAILED=1
  done
  [ "$rc" = 0 ] || { FAILED=1; say "$spec: exit $rc (log: $OUT/$name.log)"; }
  if [ "$KEEP" = 0 ]; then
    docker rm -f "$id" >/dev/null
    for v in docker containers tmp home; do docker volume rm -f "$name-$v" >/dev/null 2>&1 || true; done
  else
    say "$spec: kept: enter with \`docker exec -it $name su - $user\`; remove with \`docker rm -f $name && docker volume rm $name-docker $name-containers $name-tmp $name-home\`"
  fi
  cgroups_back
  CURRENT=""
}

CURRENT=""  # the stand-in now running: removed if this script is stopped (Ctrl-C, a kill, an error)
on_exit() {
  if [ -n "$CURRENT" ] && [ "$KEEP" = 0 ]; then
    docker rm -f "$CURRENT" >/dev/null 2>&1 || true
    for v in docker containers tmp home; do docker volume rm -f "$CURRENT-$v" >/dev/null 2>&1 || true; done
  fi
  cgroups_back
}
trap on_exit EXIT
trap 'exit 130' INT TERM
for h in "${HOSTS[@]}"; do run_host "$h"; done
printf '\nCommit %s, %s, on %s (%s cores).\n' "$COMMIT" "$(date -u +%F)" "$(uname -r)" "$(nproc)" >>"$TABLE"
cat "$TABLE"
exit "$FAILED"
}
