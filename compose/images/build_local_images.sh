#!/usr/bin/env bash
# Builds the local broker images from Debian packages, for machines with a Docker engine
# but no registry (no image can be pulled). Idempotent: an image that exists is kept
# unless FORCE=1. The Debian mirror is the one this machine's apt already uses, unless
# DEBIAN_MIRROR says otherwise.
#
#   brokerjepsen/rabbitmq:<version>-debian rabbitmq-server from Debian, one image per line in
#                                          releases.txt: 3.10.8 (bookworm), 4.0.5 (trixie),
#                                          4.3.6 (sid)
#   brokerjepsen/haproxy:2.6-debian        haproxy from Debian (the load balancer of R4)
#   brokerjepsen/zookeeper:3.8.0-debian    zookeeper + OpenJDK 17 from Debian (also the JVM
#                                          base of the Kafka image)
#   brokerjepsen/kafka:<version>-debian    the Kafka releases of releases.txt from Maven
#                                          Central, and from a release tarball where one is
#                                          supplied (build_kafka_image.sh)
set -euo pipefail

SUITE=${DEBIAN_SUITE:-bookworm}
ZOOKEEPER_IMAGE=${LOCAL_ZOOKEEPER_IMAGE:-brokerjepsen/zookeeper:3.8.0-debian}
HAPROXY_IMAGE=${LOCAL_HAPROXY_IMAGE:-brokerjepsen/haproxy:2.6-debian}
here=$(cd "$(dirname "$0")" && pwd)
# libfaketime: a node's fake clock (cluster.fake_clock, compose/clocks.py), preloaded only when a
# scenario asks; the Kafka images inherit it from the JVM base.
TOOLS=iptables,iproute2,procps,iputils-ping,ca-certificates,libfaketime

present() { [[ "${FORCE:-0}" != 1 ]] && docker image inspect "$1" >/dev/null 2>&1; }

debian_mirror() {
  local mirror=${DEBIAN_MIRROR:-}
  if [[ -z "$mirror" ]]; then
    # First non-security Debian URI from deb822 sources, then from the one-line format.
    mirror=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
               | awk '{print $2}' | grep -v security | grep -i debian | head -n1 || true)
  fi
  if [[ -z "$mirror" && -f /etc/apt/sources.list ]]; then
    mirror=$(awk '$1=="deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
  fi
  if [[ -z "$mirror" ]]; then
    echo "build_local_images: no Debian mirror found in apt's sources; set DEBIAN_MIRROR" >&2
    exit 2
  fi
  echo "$mirror"
}

# debootstrap_image IMAGE PACKAGES ENTRYPOINT_SCRIPT PREPARE_FUNCTION DOCKER_CHANGES...
# (the Debian suite: $SUITE, bookworm unless the caller sets it)
debootstrap_image() {
  local image=$1 packages=$2 entrypoint=$3 prepare=$4
  shift 4
  command -v debootstrap >/dev/null || { echo "build_local_images: debootstrap is not installed" >&2; exit 2; }
  local mirror work rootfs start
  mirror=$(debian_mirror)
  work=$(mktemp -d /tmp/brokerjepsen-rootfs.XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  rootfs="$work/rootfs"
  echo "debootstrap $SUITE ($packages) for $image ..."
  start=$(date +%s)
  debootstrap --variant=minbase --include="$packages,$TOOLS" \
    "$SUITE" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
      tail -n 20 "$work/debootstrap.log" >&2; echo "build_local_images: debootstrap failed" >&2; exit 1; }
  install -m 0755 "$here/$entrypoint" "$rootfs/usr/local/bin/docker-entrypoint.sh"
  link_libfaketime "$rootfs"
  "$prepare" "$rootfs"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
  tar -C "$rootfs" -c . | docker import \
    --change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
    --change "LABEL org.brokerjepsen.base=debian-$SUITE" \
    "$@" - "$image" >/dev/null
  echo "built $image in $(( $(date +%s) - start )) s"
}

# Debian puts libfaketime under its multiarch directory (/usr/lib/x86_64-linux-gnu/faketime/);
# one path on every architecture is what a compose file can name (compose/clocks.py LIBRARY).
link_libfaketime() {
  local rootfs=$1 lib
  lib=$(cd "$rootfs" && ls usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -n1)
  [[ -n "$lib" ]] || { echo "build_local_images: libfaketime.so.1 missing from the rootfs" >&2; exit 1; }
  mkdir -p "$rootfs/usr/local/lib/faketime"
  ln -sf "/$lib" "$rootfs/usr/local/lib/faketime/libfaketime.so.1"
}

prepare_rabbitmq() {
  local rootfs=$1 version
  version=$(chroot "$rootfs" dpkg-query -W -f='${Version}' rabbitmq-server)
  echo "$version" >"$rootfs/etc/brokerjepsen-version"
  # The suite must carry the release its image is named for (a moved suite would not).
  if [[ "${version%%-*}" != "$RABBITMQ_VERSION" ]]; then
    echo "build_local_images: $SUITE has rabbitmq-server $version, not $RABBITMQ_VERSION" >&2
    exit 1
  fi
  # The package's own node state must not leak into containers: each starts empty.
  rm -rf "$rootfs"/var/lib/rabbitmq/mnesia "$rootfs"/var/lib/rabbitmq/.erlang.cookie
}

prepare_haproxy() {
  local rootfs=$1
  chroot "$rootfs" dpkg-query -W -f='${Version}' haproxy >"$rootfs/etc/brokerjepsen-version"
  mkdir -p "$rootfs/usr/local/etc/haproxy"
}

prepare_zookeeper() {
  local rootfs=$1
  chroot "$rootfs" dpkg-query -W -f='${Version}' libzookeeper-java >"$rootfs/etc/brokerjepsen-version"
  rm -rf "$rootfs"/var/lib/zookeeper/version-2 "$rootfs"/var/lib/zookeeper/myid
}

# rabbitmq_image VERSION SUITE: one RabbitMQ release from the Debian suite that carries it.
rabbitmq_image() {
  local RABBITMQ_VERSION=$1 SUITE=$2 image=brokerjepsen/rabbitmq:$1-debian
  if present "$image"; then echo "image $image present"; return; fi
  debootstrap_image "$image" rabbitmq-server rabbitmq-entrypoint.sh prepare_rabbitmq \
    --change 'CMD ["rabbitmq-server"]' --change 'EXPOSE 5672 5552 15672 25672 4369' \
    --change "LABEL org.brokerjepsen.rabbitmq-version=$RABBITMQ_VERSION"
}

# The RabbitMQ images and the load balancer's: releases.txt names every release setup builds;
# RABBITMQ_VERSIONS picks some of them.
rabbitmq_images() {
  local kind version suite
  while read -r kind version suite; do
    [[ "$kind" == rabbitmq ]] || continue
    if [[ -n "${RABBITMQ_VERSIONS:-}" && " $RABBITMQ_VERSIONS " != *" $version "* ]]; then continue; fi
    rabbitmq_image "$version" "$suite"
  done < <(grep -v '^#' "$here/releases.txt")
  if present "$HAPROXY_IMAGE"; then
    echo "image $HAPROXY_IMAGE present"
  else
    debootstrap_image "$HAPROXY_IMAGE" haproxy haproxy-entrypoint.sh prepare_haproxy \
      --change 'EXPOSE 5672' --change "LABEL org.brokerjepsen.haproxy-version=2.6"
  fi
}

# The JVM base (ZooKeeper's image) and then Kafka's, beside the RabbitMQ images: a fresh machine
# waits on downloads more than on its cores, so the two lines of builds overlap.
jvm_images() {
  if present "$ZOOKEEPER_IMAGE"; then
    echo "image $ZOOKEEPER_IMAGE present"
  else
    debootstrap_image "$ZOOKEEPER_IMAGE" libzookeeper-java,openjdk-17-jre-headless,bash \
      zookeeper-entrypoint.sh prepare_zookeeper \
      --change 'CMD ["zookeeper"]' --change 'EXPOSE 2181 2888 3888' \
      --change "LABEL org.brokerjepsen.zookeeper-version=3.8.0"
  fi
  # Without Maven's registry there is no Kafka image: say so and carry on (RabbitMQ still runs;
  # the real-Kafka tests then fail in CI and skip elsewhere, with this reason).
  local rc=0
  bash "$here/build_kafka_image.sh" || rc=$?
  if ((rc == 3)); then
    echo "setup: no Kafka image could be built here; Kafka scenarios will say what is missing" >&2
  elif ((rc != 0)); then
    return "$rc"
  fi
}

rabbitmq_images &
rabbitmq_pid=$!
jvm_images &
jvm_pid=$!
# Interrupted or failed, neither line of builds outlives the script.
trap 'kill "$rabbitmq_pid" "$jvm_pid" 2>/dev/null || true' EXIT
jvm_rc=0 rabbitmq_rc=0
wait "$jvm_pid" || jvm_rc=$?
wait "$rabbitmq_pid" || rabbitmq_rc=$?
if ((jvm_rc != 0)); then exit "$jvm_rc"; fi
exit "$rabbitmq_rc"
