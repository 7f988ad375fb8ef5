#!/bin/bash
# The local Kafka image's launcher, installed as /opt/kafka/bin/<tool>.sh under the names of the
# release's scripts (kafka-server-start.sh, kafka-storage.sh, kafka-topics.sh, ...): it runs the
# tool's class on the jars Maven resolved, with the JVM flags of the release's kafka-run-class.sh
# (G1, short pauses, headless) and its logging split: the broker logs INFO to stdout, a tool logs
# WARN to stderr so that its stdout stays parseable.
set -euo pipefail
base=/opt/kafka
tool=$(basename "$0" .sh)
case "$tool" in
  kafka-server-start)     class=kafka.Kafka ;;
  kafka-storage)          class=kafka.tools.StorageTool ;;
  kafka-topics)           class=org.apache.kafka.tools.TopicCommand ;;
  kafka-metadata-quorum)  class=org.apache.kafka.tools.MetadataQuorumCommand ;;
  kafka-leader-election)  class=org.apache.kafka.tools.LeaderElectionCommand ;;
  kafka-consumer-groups)  class=org.apache.kafka.tools.consumer.group.ConsumerGroupCommand ;;
  kafka-features)         class=org.apache.kafka.tools.FeatureCommand ;;
  kafka-get-offsets)      class=org.apache.kafka.tools.GetOffsetShell ;;
  kafka-run-class)        class=$1; shift ;;
  *) echo "kafka-launcher: no tool named $tool" >&2; exit 127 ;;
esac

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
  ${KAFKA_OPTS:-} -cp "$base/libs/*" "$class" "$@"
