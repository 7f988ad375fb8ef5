#!/usr/bin/env bash
# Brings a Docker engine up when none answers: make setup's first step.
#   - an engine that answers `docker info` (a laptop, a CI runner with Docker): nothing to do;
#   - otherwise, as root on Debian or Ubuntu: install Debian's docker.io (containerd, runc and
#     iptables come with it), mount the cgroup hierarchy when none is mounted, start dockerd in
#     the background (log: $DOCKERD_LOG) and wait, bounded, until `docker info` answers. Where
#     overlay2 cannot be used, fuse-overlayfs is installed and tried next;
#   - where none of that can be done: one line saying what to do, exit 1.
set -euo pipefail
LOG=${DOCKERD_LOG:-/var/log/brokerjepsen-dockerd.log}
WAIT=${DOCKERD_WAIT_SECONDS:-60}

fail() { echo "setup: $*" >&2; exit 1; }
answers() { timeout 10 docker info >/dev/null 2>&1; }

answers && exit 0

[[ $(id -u) -eq 0 ]] || fail "no Docker engine answers (docker info) and we are not root: start one (sudo systemctl start docker, or Docker Desktop) and run make setup again"
command -v apt-get >/dev/null || fail "no Docker engine answers and this is not a Debian-like system: install and start Docker, then run make setup again"

apt_install() {
  echo "setup: apt-get install $*"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 \
    || fail "apt-get install $* failed"
}
command -v dockerd >/dev/null || apt_install docker.io
command -v docker >/dev/null || fail "docker.io installed no docker client"

# dockerd needs a cgroup hierarchy; a bare container or VM may have none mounted.
if ! grep -qE '^\S+ /sys/fs/cgroup(/\S+)? (cgroup|cgroup2) ' /proc/mounts; then
  echo "setup: mounting the cgroup2 hierarchy on /sys/fs/cgroup"
  mkdir -p /sys/fs/cgroup
  mount -t cgroup2 none /sys/fs/cgroup || fail "cannot mount cgroups: dockerd cannot run here"
fi

# start_dockerd [ARGS...]: 0 once `docker info` answers, 1 when dockerd exits or WAIT runs out.
start_dockerd() {
  echo "setup: starting dockerd $* (log: $LOG)"
  setsid nohup dockerd "$@" >>"$LOG" 2>&1 </dev/null &
  local pid=$! waited=0
  while ((waited < WAIT)); do
    answers && { echo "setup: Docker engine up after ${waited} s"; return 0; }
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 1
    waited=$((waited + 1))
  done
  kill "$pid" 2>/dev/null || true
  return 1
}

# A dockerd left from an earlier start that never answered would hold the socket's pid file.
if pgrep -x dockerd >/dev/null; then
  echo "setup: a dockerd is running but does not answer; stopping it"
  pkill -x dockerd || true
  sleep 3
fi
start_dockerd && exit 0
if grep -qiE 'overlay' "$LOG"; then
  command -v fuse-overlayfs >/dev/null || apt_install fuse-overlayfs
  start_dockerd --storage-driver=fuse-overlayfs && exit 0
fi
fail "dockerd did not answer within ${WAIT} s: $(grep -iE 'level=(fatal|error)' "$LOG" | tail -n1 | cut -c1-300)"
