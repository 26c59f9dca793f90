#!/usr/bin/env bash
# A real OCI registry on loopback for Berth's tests of plugin modules from registries
# (host/tests/oci.rs and the live tier's hot swap from a registry).
#
#   registry.sh install    install Debian's docker-registry (the CNCF distribution
#                          registry, /usr/bin/docker-registry) when it is missing;
#                          needs root for apt-get. The package's own service is kept
#                          from starting: the tests start their own registries, each
#                          on a free loopback port with its own storage and htpasswd.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

log() { echo "registry.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

install() {
  if [ -x /usr/bin/docker-registry ]; then
    log "/usr/bin/docker-registry is installed"
    return 0
  fi
  command -v apt-get >/dev/null || die "apt-get not found: install the docker-registry package (Debian) by other means"
  [ "$(id -u)" = 0 ] || die "installing docker-registry needs root for apt-get"
  # Keep the package's service from starting (and binding port 5000): maintainer
  # scripts ask policy-rc.d, and 101 means "not allowed".
  local policy=/usr/sbin/policy-rc.d placed=
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    placed=1
  fi
  local rc=0
  apt_install registry.sh docker-registry || rc=$?
  [ -n "$placed" ] && rm -f "$policy"
  [ "$rc" = 0 ] || die "could not install docker-registry"
  [ -x /usr/bin/docker-registry ] || die "docker-registry installed, but /usr/bin/docker-registry is missing"
  log "installed $(/usr/bin/docker-registry --version 2>/dev/null || echo docker-registry)"
}

case "${1:-}" in
  install) install ;;
  *) die "usage: registry.sh install" ;;
esac
