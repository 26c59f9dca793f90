#!/usr/bin/env bash
# Headless Chromium, for the test of the page `berth simulate --serve` serves
# (host/tests/page.rs): it loads the page, dumps its DOM and takes screenshots.
#
#   chromium.sh install    install Debian's `chromium` package when the browser the
#                          test runs ($BERTH_CHROMIUM, else /usr/bin/chromium) is
#                          missing (needs root for apt-get; Debian 12)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

log() { echo "chromium.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

browser="${BERTH_CHROMIUM:-/usr/bin/chromium}"

case "${1:-}" in
  install)
    if [ -x "$browser" ]; then
      log "$browser is there: $("$browser" --version 2>/dev/null || echo 'version unknown')"
      exit 0
    fi
    command -v apt-get >/dev/null || die "apt-get not found: install Chromium and set BERTH_CHROMIUM to it"
    [ "$(id -u)" = 0 ] || die "installing chromium needs root for apt-get (or set BERTH_CHROMIUM)"
    apt_install chromium.sh chromium || die "could not install chromium"
    [ -x "$browser" ] || die "apt-get installed chromium, but $browser is still missing"
    log "installed: $("$browser" --version)"
    ;;
  *)
    die "usage: chromium.sh install"
    ;;
esac
