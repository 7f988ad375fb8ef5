#!/usr/bin/env bash
# Builds the local Kafka images on the Debian JVM base (brokerjepsen/zookeeper:3.8.0-debian:
# Debian, OpenJDK 17, iptables, iproute2):
#
#   brokerjepsen/kafka:<version>-debian   for each pinned line in KAFKA_LINES (default "3.9 4.1"),
#                                         from the broker and tool jars on Maven Central
#                                         (kafka-maven/pom.xml pins the versions);
#                                         and, when a release tarball is supplied (KAFKA_TARBALL,
#                                         or compose/images/kafka-dist/), from it.
#
# Idempotent: an image that exists is kept unless FORCE=1. Maven's local repository (~/.m2) keeps
# the jars, so a rebuild downloads nothing. Where Maven is missing or cannot reach its registry,
# one line says so and the script exits 3 (make setup carries on: RabbitMQ still runs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BASE=${LOCAL_ZOOKEEPER_IMAGE:-brokerjepsen/zookeeper:3.8.0-debian}
LINES=${KAFKA_LINES:-3.9 4.1}
TOOLS="kafka-server-start kafka-storage kafka-topics kafka-metadata-quorum kafka-leader-election
  kafka-consumer-groups kafka-features kafka-get-offsets kafka-run-class"

present() { [[ "${FORCE:-0}" != 1 ]] && docker image inspect "$1" >/dev/null 2>&1; }

need_base() {
  docker image inspect "$BASE" >/dev/null 2>&1 || {
    echo "build_kafka_image: the JVM base $BASE is missing (make setup builds it)" >&2; exit 2; }
}

# The version a line's Maven profile pins (kafka-maven/pom.xml, profile kafka-<line>).
# The Dockerfile lines every Kafka image ends with: our entrypoint, PATH, labels, ports.
image_tail() {
  cat <<TAIL
COPY kafka-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/opt/kafka/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LABEL org.brokerjepsen.kafka-version=$1 org.brokerjepsen.kafka-source=$2
EXPOSE 9092 9093 19092
CMD ["kafka"]
TAIL
}

# docker build, its output kept out of setup's unless it fails (the CLI warns about the
# legacy builder on every build).
build_image() {
  docker build -q -t "$1" "$2" >"$2/build.log" 2>&1 || {
    tail -n 20 "$2/build.log" >&2; echo "build_kafka_image: docker build of $1 failed" >&2; exit 1; }
}

pinned_version() {
  awk -v id="<id>kafka-$1</id>" '
    index($0, id) { inside = 1 }
    inside && /<kafka.version>/ { gsub(/.*<kafka.version>|<\/kafka.version>.*/, ""); print; exit }
  ' "$here/kafka-maven/pom.xml"
}

from_maven() {
  local line=$1 version image ctx start
  version=$(pinned_version "$line")
  [[ -n "$version" ]] || { echo "build_kafka_image: no Maven profile kafka-$line" >&2; exit 2; }
  image=brokerjepsen/kafka:$version-debian
  if present "$image"; then echo "image $image present"; return; fi
  command -v mvn >/dev/null || {
    echo "build_kafka_image: mvn is not installed (apt-get install maven): Kafka $version image not built" >&2
    exit 3; }
  need_base
  ctx=$(mktemp -d /tmp/brokerjepsen-kafka.XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$ctx'" RETURN
  start=$(date +%s)
  if ! mvn -q -B -f "$here/kafka-maven/pom.xml" -P "kafka-$line" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$ctx/libs" >"$ctx/mvn.log" 2>&1; then
    grep -m1 -E 'ERROR' "$ctx/mvn.log" >&2 || tail -n 3 "$ctx/mvn.log" >&2
    echo "build_kafka_image: Maven could not resolve Kafka $version: image not built" >&2
    exit 3
  fi
  mkdir -p "$ctx/config"
  if [[ "$line" == 3.* ]]; then
    cp "$here"/kafka-config/log4j-*.properties "$ctx/config/"
  else
    cp "$here"/kafka-config/log4j2-*.properties "$ctx/config/"
  fi
  install -m 0755 "$here/kafka-launcher.sh" "$ctx/kafka-launcher.sh"
  install -m 0755 "$here/kafka-entrypoint.sh" "$ctx/kafka-entrypoint.sh"
  cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $BASE
COPY libs/ /opt/kafka/libs/
COPY config/ /opt/kafka/config/
COPY kafka-launcher.sh /opt/kafka/bin/kafka-launcher.sh
RUN cd /opt/kafka/bin && for t in $(echo $TOOLS); do ln -s kafka-launcher.sh \$t.sh; done \
 && mkdir -p /var/lib/kafka/data /var/log/kafka
DOCKERFILE
  image_tail "$version" maven-central >>"$ctx/Dockerfile"
  build_image "$image" "$ctx"
  echo "built $image from Maven Central in $(( $(date +%s) - start )) s"
}

from_tarball() {
  local tarball=$1 name version image ctx start
  [[ -f "$tarball" ]] || { echo "build_kafka_image: KAFKA_TARBALL=$tarball does not exist" >&2; exit 2; }
  name=$(basename "$tarball")
  if [[ ! "$name" =~ ^kafka_[0-9.]+-([0-9][0-9A-Za-z.-]*)\.(tgz|tar\.gz)$ ]]; then
    echo "build_kafka_image: $name is not named like a Kafka release (kafka_2.13-3.9.1.tgz)" >&2
    exit 2
  fi
  version=${BASH_REMATCH[1]}
  image=brokerjepsen/kafka:$version-debian
  if present "$image"; then echo "image $image present"; return; fi
  need_base
  ctx=$(mktemp -d /tmp/brokerjepsen-kafka.XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$ctx'" RETURN
  cp "$tarball" "$ctx/kafka.tgz"
  install -m 0755 "$here/kafka-entrypoint.sh" "$ctx/kafka-entrypoint.sh"
  cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $BASE
ADD kafka.tgz /opt/
RUN mv /opt/kafka_* /opt/kafka && mkdir -p /var/lib/kafka/data
DOCKERFILE
  image_tail "$version" release-tarball >>"$ctx/Dockerfile"
  start=$(date +%s)
  build_image "$image" "$ctx"
  echo "built $image from $name in $(( $(date +%s) - start )) s"
}

for line in $LINES; do from_maven "$line"; done

# A release tarball, where the user supplies one: KAFKA_TARBALL, else the drop folder.
tarball=${KAFKA_TARBALL:-}
if [[ -z "$tarball" ]]; then
  tarball=$(ls -1 "$here"/kafka-dist/kafka_*.tgz "$here"/kafka-dist/kafka_*.tar.gz 2>/dev/null \
              | sort -V | tail -n1 || true)
fi
if [[ -n "$tarball" ]]; then from_tarball "$tarball"; fi
