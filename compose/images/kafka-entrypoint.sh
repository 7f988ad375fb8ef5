#!/bin/bash
# Entry point of the local Kafka image, configured like the official images: every KAFKA_*
# variable is a server property (KAFKA_FOO_BAR -> foo.bar; "__" -> "_", "___" -> "-"), except
# KAFKA_HEAP_OPTS, KAFKA_OPTS and KAFKA_JVM_PERFORMANCE_OPTS, which go to the JVM. In KRaft
# mode (KAFKA_PROCESS_ROLES set) the log directory is formatted with CLUSTER_ID on first start.
set -euo pipefail
if [ "${1:-}" != "kafka" ]; then exec "$@"; fi

props=/opt/kafka/config/brokerjepsen.properties
: >"$props"
while IFS='=' read -r name value; do
  case "$name" in
    KAFKA_HEAP_OPTS|KAFKA_OPTS|KAFKA_JVM_PERFORMANCE_OPTS|KAFKA_LOG4J_OPTS|KAFKA_GC_LOG_OPTS) continue ;;
  esac
  key=${name#KAFKA_}
  key=$(printf '%s' "$key" | sed -e 's/___/-/g' -e 's/__/@/g' -e 's/_/./g' -e 's/@/_/g' | tr '[:upper:]' '[:lower:]')
  printf '%s=%s\n' "$key" "$value" >>"$props"
done < <(env | grep -E '^KAFKA_[A-Z0-9_]+=' | sort)

if grep -q '^process.roles=' "$props"; then
  logdir=$(sed -n 's/^log.dirs=//p' "$props" | cut -d, -f1)
  if [ ! -f "${logdir:-/tmp/kraft-combined-logs}/meta.properties" ]; then
    : "${CLUSTER_ID:?KRaft mode needs CLUSTER_ID}"
    kafka-storage.sh format --ignore-formatted -t "$CLUSTER_ID" -c "$props" >/dev/null
  fi
fi
exec kafka-server-start.sh "$props"
