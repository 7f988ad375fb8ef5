#!/bin/sh
# Entry point of the local Debian HAProxy image: the load balancer in front of a RabbitMQ
# cluster (R4), configured by the file the harness mounts; in the foreground, logging to stdout.
set -e
exec haproxy -db -f /usr/local/etc/haproxy/haproxy.cfg "$@"
