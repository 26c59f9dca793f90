#!/usr/bin/env bash
# Installing Debian packages for the test prerequisites, sourced by the scripts in this
# directory: `apt_install WHO PACKAGE...` (WHO names the caller in messages).
#
# A machine may come with dpkg in an interrupted state (an earlier install killed
# half-way: "dpkg was interrupted, you must manually run 'dpkg --configure -a'"), or
# with another apt process holding the lock for a while (unattended upgrades): both are
# handled here rather than failing the run.

apt_install() {
  local who="$1"; shift
  command -v apt-get >/dev/null || { echo "$who: error: apt-get not found: install $* by other means" >&2; return 1; }
  [ "$(id -u)" = 0 ] || { echo "$who: error: installing $* needs root for apt-get" >&2; return 1; }
  apt_finish_interrupted "$who" || return 1
  echo "$who: apt-get update" >&2
  apt-get update -qq -o DPkg::Lock::Timeout=600 >&2 || {
    echo "$who: apt-get update failed; once more" >&2
    sleep 5
    apt-get update -qq -o DPkg::Lock::Timeout=600 >&2 || { echo "$who: error: apt-get update failed" >&2; return 1; }
  }
  echo "$who: apt-get install $*" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 "$@" >&2 \
    || { echo "$who: error: apt-get install $* failed" >&2; return 1; }
}

# dpkg keeps the packages it was in the middle of in /var/lib/dpkg/updates; when that is
# not empty apt-get refuses to install until `dpkg --configure -a` finishes the job.
# dpkg does not wait for its lock as apt-get does: retry while another process has it.
apt_finish_interrupted() {
  local who="$1" tries=0
  [ -n "$(ls -A /var/lib/dpkg/updates 2>/dev/null)" ] || return 0
  echo "$who: dpkg was interrupted earlier on this machine: dpkg --configure -a" >&2
  until DEBIAN_FRONTEND=noninteractive dpkg --force-confdef --force-confold --configure -a >&2; do
    tries=$((tries + 1))
    if [ "$tries" -ge 60 ]; then
      echo "$who: error: dpkg --configure -a kept failing; see above" >&2
      return 1
    fi
    sleep 10
  done
}
