#!/usr/bin/env bash
# Builds the local Kafka images on the Debian JVM base (brokerjepsen/zookeeper:3.8.0-debian:
# Debian, OpenJDK 17, iptables, iproute2):
#
#   brokerjepsen/kafka:<version>-debian   for each release in KAFKA_VERSIONS (default: the kafka
#                                         lines of releases.txt), any release from 3.7 on, from
#                                         the broker and tool jars on Maven Central;
#                                         and, when a release tarball is supplied (KAFKA_TARBALL,
#                                         or compose/images/kafka-dist/), from it.
#
# The broker runs on its release's jars. The admin tools (kafka-topics, kafka-metadata-quorum,
# kafka-features, kafka-leader-election, ...) run on their own class path: the release's own
# kafka-tools where Maven Central has it, else the newest earlier release's (they speak the
# wire protocol to the broker, which every client version may). The image's labels say which.
#
# Idempotent: an image that exists is kept unless FORCE=1. Maven's local repository (~/.m2) keeps
# the jars, so a rebuild downloads nothing. Where Maven is missing or cannot reach its registry,
# one line says so and the script exits 3 (make setup carries on: RabbitMQ still runs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BASE=${LOCAL_ZOOKEEPER_IMAGE:-brokerjepsen/zookeeper:3.8.0-debian}
MAVEN=${MAVEN_CENTRAL:-https://repo.maven.apache.org/maven2}
VERSIONS=${KAFKA_VERSIONS:-$(awk '$1 == "kafka" {print $2}' "$here/releases.txt")}
# tool  classpath  main classes, newest location first (classes moved from core to tools).
TOOL_CLASSES="
kafka-server-start    libs   kafka.Kafka
kafka-storage         libs   kafka.tools.StorageTool org.apache.kafka.tools.StorageTool
kafka-topics          tools  org.apache.kafka.tools.TopicCommand kafka.admin.TopicCommand
kafka-metadata-quorum tools  org.apache.kafka.tools.MetadataQuorumCommand
kafka-leader-election tools  org.apache.kafka.tools.LeaderElectionCommand kafka.admin.LeaderElectionCommand
kafka-consumer-groups tools  org.apache.kafka.tools.consumer.group.ConsumerGroupCommand kafka.admin.ConsumerGroupCommand
kafka-features        tools  org.apache.kafka.tools.FeatureCommand kafka.admin.FeatureCommand
kafka-get-offsets     tools  org.apache.kafka.tools.GetOffsetShell kafka.tools.GetOffsetShell
kafka-reassign-partitions tools org.apache.kafka.tools.reassign.ReassignPartitionsCommand kafka.admin.ReassignPartitionsCommand
kafka-cluster         tools  org.apache.kafka.tools.ClusterTool kafka.tools.ClusterTool
"

present() { [[ "${FORCE:-0}" != 1 ]] && docker image inspect "$1" >/dev/null 2>&1; }

need_base() {
  docker image inspect "$BASE" >/dev/null 2>&1 || {
    echo "build_kafka_image: the JVM base $BASE is missing (make setup builds it)" >&2; exit 2; }
}

# The Dockerfile lines every Kafka image ends with: our entrypoint, PATH, labels, ports.
image_tail() {
  cat <<TAIL
COPY kafka-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/opt/kafka/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LABEL org.brokerjepsen.kafka-version=$1 org.brokerjepsen.kafka-source=$2 org.brokerjepsen.kafka-tools-version=$3
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

# resolve VERSION DIR [TOOLS_ARTIFACT]: the release's broker and tools jars (and the logging
# binding its major line's launcher expects) into DIR; fails when Maven has no such artifacts.
resolve() {
  local profile=log4j2
  [[ "$1" == 3.* ]] && profile=reload4j
  mvn -q -B -f "$here/kafka-maven/pom.xml" -Dkafka.version="$1" -Dtools.artifact="${3:-kafka-tools}" \
    -P "$profile" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$2" \
    >>"$2.log" 2>&1
}

# The newest kafka-tools release on Maven Central not newer than VERSION.
tools_release_for() {
  curl -fsS --max-time 20 "$MAVEN/org/apache/kafka/kafka-tools/maven-metadata.xml" \
    | grep -o '<version>[0-9.]*</version>' | sed 's/<[^>]*>//g' \
    | { cat; echo "$1"; } | sort -V | awk -v v="$1" '$0 == v {print prev; exit} {prev = $0}'
}

# tool_classes DIR: "tool classpath class" for each tool whose class a jar in DIR/<classpath>
# holds (the launcher's table).
tool_classes() {
  local dir=$1 listing
  listing=$(find "$dir/libs" "$dir/tools-libs" -name '*.jar' -exec unzip -Z1 {} \; \
              | sed -n 's/\.class$//p' | tr / . | sort -u)
  echo "$TOOL_CLASSES" | while read -r tool cp classes; do
    [[ -n "$tool" ]] || continue
    for class in $classes; do
      if grep -qxF "$class" <<<"$listing"; then echo "$tool $cp $class"; break; fi
    done
  done
}

from_maven() {
  local version=$1 image ctx start tools_version
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
  echo "Kafka $version: resolving its jars from Maven Central ..."
  tools_version=$version
  if ! resolve "$version" "$ctx/libs"; then
    # A release published without kafka-tools: the broker alone, tools from an earlier release.
    if ! resolve "$version" "$ctx/libs" kafka-tools-api; then
      grep -m1 -E 'ERROR' "$ctx/libs.log" >&2 || tail -n 3 "$ctx/libs.log" >&2
      echo "build_kafka_image: Maven could not resolve Kafka $version: image not built" >&2
      exit 3
    fi
    tools_version=$(tools_release_for "$version")
    [[ -n "$tools_version" ]] || { echo "build_kafka_image: no kafka-tools release up to $version" >&2; exit 3; }
    echo "Kafka $version: Maven Central has no kafka-tools $version; the admin tools are $tools_version's"
  fi
  if [[ "$tools_version" == "$version" ]]; then
    mkdir -p "$ctx/tools-libs"
  else
    resolve "$tools_version" "$ctx/tools-libs" || {
      echo "build_kafka_image: Maven could not resolve kafka-tools $tools_version" >&2; exit 3; }
  fi
  rm -f "$ctx"/*.log
  mkdir -p "$ctx/config"
  if [[ "$version" == 3.* ]]; then
    cp "$here"/kafka-config/log4j-*.properties "$ctx/config/"
  else
    cp "$here"/kafka-config/log4j2-*.properties "$ctx/config/"
  fi
  tool_classes "$ctx" >"$ctx/tool-classes"
  install -m 0755 "$here/kafka-launcher.sh" "$ctx/kafka-launcher.sh"
  install -m 0755 "$here/kafka-entrypoint.sh" "$ctx/kafka-entrypoint.sh"
  cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $BASE
COPY libs/ /opt/kafka/libs/
COPY tools-libs/ /opt/kafka/tools-libs/
COPY config/ /opt/kafka/config/
COPY tool-classes /opt/kafka/bin/tool-classes
COPY kafka-launcher.sh /opt/kafka/bin/kafka-launcher.sh
RUN cd /opt/kafka/bin && for t in \$(cut -d' ' -f1 tool-classes) kafka-run-class; do ln -s kafka-launcher.sh \$t.sh; done \
 && mkdir -p /var/lib/kafka/data /var/log/kafka
DOCKERFILE
  image_tail "$version" maven-central "$tools_version" >>"$ctx/Dockerfile"
  echo "Kafka $version: building $image ..."
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
  image_tail "$version" release-tarball "$version" >>"$ctx/Dockerfile"
  start=$(date +%s)
  build_image "$image" "$ctx"
  echo "built $image from $name in $(( $(date +%s) - start )) s"
}

for version in $VERSIONS; do from_maven "$version"; done

# A release tarball, where the user supplies one: KAFKA_TARBALL, else the drop folder.
tarball=${KAFKA_TARBALL:-}
if [[ -z "$tarball" ]]; then
  tarball=$(ls -1 "$here"/kafka-dist/kafka_*.tgz "$here"/kafka-dist/kafka_*.tar.gz 2>/dev/null \
              | sort -V | tail -n1 || true)
fi
if [[ -n "$tarball" ]]; then from_tarball "$tarball"; fi
