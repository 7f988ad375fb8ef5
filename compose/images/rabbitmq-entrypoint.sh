#!/bin/sh
# Entry point of the local Debian RabbitMQ image: the same contract as the official image
# (config in /etc/rabbitmq, data in /var/lib/rabbitmq, node name rabbit@<hostname>).
set -e
mkdir -p /var/lib/rabbitmq /var/log/rabbitmq
chown -R rabbitmq:rabbitmq /var/lib/rabbitmq /var/log/rabbitmq
if [ "$1" = "rabbitmq-server" ]; then
  # Log to stdout so `docker logs` holds the broker log, as with the official image.
  export RABBITMQ_LOGS=-
  exec runuser -u rabbitmq -- /usr/lib/rabbitmq/bin/rabbitmq-server
fi
exec "$@"
