#!/bin/bash
# Entry point of the local Debian ZooKeeper image. Configured like confluentinc/cp-zookeeper:
#   ZOOKEEPER_SERVER_ID, ZOOKEEPER_CLIENT_PORT, ZOOKEEPER_TICK_TIME, ZOOKEEPER_INIT_LIMIT,
#   ZOOKEEPER_SYNC_LIMIT, ZOOKEEPER_SERVERS ("zk1:2888:3888;zk2:2888:3888;..."), KAFKA_OPTS
#   and KAFKA_HEAP_OPTS (JVM options, as in that image).
set -euo pipefail
if [ "${1:-}" != "zookeeper" ]; then exec "$@"; fi

conf=/etc/zookeeper/conf
data=/var/lib/zookeeper
mkdir -p "$conf" "$data"
{
  echo "dataDir=$data"
  echo "clientPort=${ZOOKEEPER_CLIENT_PORT:-2181}"
  echo "tickTime=${ZOOKEEPER_TICK_TIME:-2000}"
  echo "initLimit=${ZOOKEEPER_INIT_LIMIT:-10}"
  echo "syncLimit=${ZOOKEEPER_SYNC_LIMIT:-5}"
  echo "admin.enableServer=false"
  echo "4lw.commands.whitelist=*"
  # Listen on every address: a quorum port bound to one address breaks after a partition.
  echo "quorumListenOnAllIPs=true"
  if [ -n "${ZOOKEEPER_SERVERS:-}" ]; then
    i=0
    IFS=';' read -ra servers <<<"$ZOOKEEPER_SERVERS"
    for s in "${servers[@]}"; do
      i=$((i + 1))
      echo "server.$i=$s"
    done
  fi
} >"$conf/zoo.cfg"
echo "${ZOOKEEPER_SERVER_ID:-1}" >"$data/myid"
cat >"$conf/log4j.properties" <<'LOG'
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] %-5p [%t] %c{1}: %m%n
LOG
# shellcheck disable=SC2086
exec java ${KAFKA_HEAP_OPTS:--Xmx256m} ${KAFKA_OPTS:-} \
  -cp "$conf:/usr/share/java/zookeeper.jar" \
  org.apache.zookeeper.server.quorum.QuorumPeerMain "$conf/zoo.cfg"
