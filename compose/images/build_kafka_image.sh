#!/usr/bin/env bash
# Builds brokerjepsen/kafka:<version>-debian from a Kafka release tarball on the local JVM base
# (brokerjepsen/zookeeper:3.8.0-debian: Debian, OpenJDK 17, iptables, iproute2). Nothing is
# downloaded. The tarball: KAFKA_TARBALL, else the newest kafka_*.tgz in compose/images/kafka-dist/
# or ../shared/kafka/.
# Without one it says so in one line and exits 0: Kafka scenarios then say what is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BASE=${LOCAL_ZOOKEEPER_IMAGE:-brokerjepsen/zookeeper:3.8.0-debian}

tarball=${KAFKA_TARBALL:-}
# The drop folder, then ../shared/kafka/ beside the checkout (where CI finds shared files).
shared=$(cd "$here/../../.." && pwd)/shared/kafka
if [[ -z "$tarball" ]]; then
  tarball=$(ls -1 "$here"/kafka-dist/kafka_*.tgz "$here"/kafka-dist/kafka_*.tar.gz \
              "$shared"/kafka_*.tgz "$shared"/kafka_*.tar.gz 2>/dev/null \
              | sort -V | tail -n1 || true)
fi
if [[ -z "$tarball" ]]; then
  echo "no Kafka tarball (KAFKA_TARBALL, compose/images/kafka-dist/ or ../shared/kafka/): Kafka image not built"
  exit 0
fi
if [[ ! -f "$tarball" ]]; then
  echo "build_kafka_image: KAFKA_TARBALL=$tarball does not exist" >&2
  exit 2
fi
name=$(basename "$tarball")
if [[ ! "$name" =~ ^kafka_[0-9.]+-([0-9][0-9A-Za-z.-]*)\.(tgz|tar\.gz)$ ]]; then
  echo "build_kafka_image: $name is not named like a Kafka release (kafka_2.13-3.9.1.tgz)" >&2
  exit 2
fi
version=${BASH_REMATCH[1]}
image=brokerjepsen/kafka:$version-debian
if [[ "${FORCE:-0}" != 1 ]] && docker image inspect "$image" >/dev/null 2>&1; then
  echo "image $image present"
  exit 0
fi
docker image inspect "$BASE" >/dev/null 2>&1 || {
  echo "build_kafka_image: the JVM base $BASE is missing (make setup builds it)" >&2; exit 2; }

ctx=$(mktemp -d /tmp/brokerjepsen-kafka.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
cp "$tarball" "$ctx/kafka.tgz"
install -m 0755 "$here/kafka-entrypoint.sh" "$ctx/kafka-entrypoint.sh"
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $BASE
ADD kafka.tgz /opt/
RUN mv /opt/kafka_* /opt/kafka && mkdir -p /var/lib/kafka/data
COPY kafka-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/opt/kafka/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LABEL org.brokerjepsen.kafka-version=$version
EXPOSE 9092 9093 19092
CMD ["kafka"]
DOCKERFILE
start=$(date +%s)
docker build -q -t "$image" "$ctx" >/dev/null
echo "built $image from $name in $(( $(date +%s) - start )) s"
