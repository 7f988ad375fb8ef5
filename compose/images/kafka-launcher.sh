#!/bin/bash
# The local Kafka image's launcher, installed as /opt/kafka/bin/<tool>.sh under the names of the
# release's scripts (kafka-server-start.sh, kafka-storage.sh, kafka-topics.sh, ...): it runs the
# tool's class on the jars Maven resolved, with the JVM flags of the release's kafka-run-class.sh
# (G1, short pauses, headless) and its logging split: the broker logs INFO to stdout, a tool logs
# WARN to stderr so that its stdout stays parseable.
set -euo pipefail
base=/opt/kafka
tool=$(basename "$0" .sh)
# tool-classes, written when the image was built: "tool classpath class" for every tool whose
# class the release's jars hold (classes moved from core to tools between releases).
if [ "$tool" = kafka-run-class ]; then
  classpath=libs class=$1
  shift
elif ! read -r _ classpath class < <(grep "^$tool " "$base/bin/tool-classes"); then
  echo "kafka-launcher: no tool named $tool in this image" >&2
  exit 127
fi
# An image whose release had no kafka-tools on Maven Central runs the tools on an earlier
# release's jars; otherwise tools-libs is empty and they run on the broker's.
if [ "$classpath" = tools ] && [ -n "$(ls -A "$base/tools-libs")" ]; then
  jars="$base/tools-libs/*"
else
  jars="$base/libs/*"
fi

if [ "$tool" = kafka-server-start ]; then
  heap=${KAFKA_HEAP_OPTS:--Xms512m -Xmx512m}
  which=server
else
  heap=-Xmx256m  # the tools' own heap, as kafka-run-class.sh gives them
  which=tools
fi
# Kafka 4.x logs through log4j2, 3.x through reload4j: the image carries the one its jars need.
if [ -f "$base/config/log4j2-$which.properties" ]; then
  logging="-Dlog4j2.configurationFile=file:$base/config/log4j2-$which.properties"
else
  logging="-Dlog4j.configuration=file:$base/config/log4j-$which.properties"
fi
performance=${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 \
-Djava.awt.headless=true}
# shellcheck disable=SC2086
exec java $heap $performance ${KAFKA_LOG4J_OPTS:-$logging} -Dkafka.logs.dir=/var/log/kafka \
  ${KAFKA_OPTS:-} -cp "$jars" "$class" "$@"
