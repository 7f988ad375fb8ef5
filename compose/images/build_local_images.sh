#!/usr/bin/env bash
# Builds the local broker images from Debian packages, for machines with a Docker engine
# but no registry (no image can be pulled). Idempotent: an image that exists is kept
# unless FORCE=1. The Debian mirror is the one this machine's apt already uses, unless
# DEBIAN_MIRROR says otherwise.
set -euo pipefail

SUITE=${DEBIAN_SUITE:-bookworm}
RABBITMQ_IMAGE=${LOCAL_RABBITMQ_IMAGE:-brokerjepsen/rabbitmq:3.10.8-debian}
here=$(cd "$(dirname "$0")" && pwd)

if [[ "${FORCE:-0}" != 1 ]] && docker image inspect "$RABBITMQ_IMAGE" >/dev/null 2>&1; then
  echo "image $RABBITMQ_IMAGE present"
  exit 0
fi

mirror=${DEBIAN_MIRROR:-}
if [[ -z "$mirror" ]]; then
  # First non-security Debian URI from deb822 sources, then from the one-line format.
  mirror=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
             | awk '{print $2}' | grep -v security | grep -i debian | head -n1 || true)
fi
if [[ -z "$mirror" && -f /etc/apt/sources.list ]]; then
  mirror=$(awk '$1=="deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
fi
if [[ -z "$mirror" ]]; then
  echo "build_local_images: no Debian mirror found in apt's sources; set DEBIAN_MIRROR" >&2
  exit 2
fi
command -v debootstrap >/dev/null || { echo "build_local_images: debootstrap is not installed" >&2; exit 2; }

work=$(mktemp -d /tmp/brokerjepsen-rootfs.XXXXXX)
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
echo "debootstrap $SUITE (rabbitmq-server, iptables, iproute2, procps) ..."
start=$(date +%s)
debootstrap --variant=minbase \
  --include=rabbitmq-server,iptables,iproute2,procps,iputils-ping,ca-certificates \
  "$SUITE" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 20 "$work/debootstrap.log" >&2; echo "build_local_images: debootstrap failed" >&2; exit 1; }

version=$(chroot "$rootfs" dpkg-query -W -f='${Version}' rabbitmq-server)
install -m 0755 "$here/rabbitmq-entrypoint.sh" "$rootfs/usr/local/bin/docker-entrypoint.sh"
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
# The package's own node state must not leak into containers: each starts empty.
rm -rf "$rootfs"/var/lib/rabbitmq/mnesia "$rootfs"/var/lib/rabbitmq/.erlang.cookie

tar -C "$rootfs" -c . | docker import \
  --change 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' \
  --change 'CMD ["rabbitmq-server"]' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
  --change 'EXPOSE 5672 15672 25672 4369' \
  --change "LABEL org.brokerjepsen.rabbitmq-version=$version org.brokerjepsen.base=debian-$SUITE" \
  - "$RABBITMQ_IMAGE" >/dev/null
echo "built $RABBITMQ_IMAGE (rabbitmq-server $version) in $(( $(date +%s) - start )) s"
