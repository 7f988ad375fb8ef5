#!/bin/bash
# Entry point of the local Kafka image, configured like the official images: every KAFKA_*
# variable is a server property (KAFKA_FOO_BAR -> foo.bar; "__" -> "_", "___" -> "-"), except
# KAFKA_HEAP_OPTS, KAFKA_OPTS and KAFKA_JVM_PERFORMANCE_OPTS, which go to the JVM. In KRaft
# mode (KAFKA_PROCESS_ROLES set) the log directory is formatted with CLUSTER_ID on first start;
# a dynamic quorum's (KIP-853, Kafka 3.9 on) with BROKERJEPSEN_INITIAL_CONTROLLERS
# (id@host:port:directory-id,... on its first voters: --initial-controllers) or
# BROKERJEPSEN_NO_INITIAL_CONTROLLERS=1 (brokers, controllers added later:
# --no-initial-controllers). Neither is a KAFKA_* variable: neither becomes a server property.
set -euo pipefail
if [ "${1:-}" != "kafka" ]; then exec "$@"; fi

# Where the properties go (another place only for the entrypoint's own tests).
props=${BROKERJEPSEN_PROPERTIES:-/opt/kafka/config/brokerjepsen.properties}
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
    quorum=()
    if [ -n "${BROKERJEPSEN_INITIAL_CONTROLLERS:-}" ]; then
      quorum=(--initial-controllers "$BROKERJEPSEN_INITIAL_CONTROLLERS")
    elif [ "${BROKERJEPSEN_NO_INITIAL_CONTROLLERS:-}" = 1 ]; then
      quorum=(--no-initial-controllers)
    fi
    # --cluster-id=ID, not -t ID: a ZooKeeper-mode cluster's id (a migration's controllers
    # take it) may begin with "-", which the tool would read as an option.
    kafka-storage.sh format --ignore-formatted --cluster-id="$CLUSTER_ID" -c "$props" \
      ${quorum[@]+"${quorum[@]}"} >/dev/null
  fi
fi
exec kafka-server-start.sh "$props"
