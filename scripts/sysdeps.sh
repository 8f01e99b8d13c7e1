#!/usr/bin/env bash
# Install the Debian packages storlab's runners and tests drive, only when missing.
set -euo pipefail
need=()
for prog in fio:fio postmark:postmark sysbench:sysbench; do
  cmd=${prog%%:*}; pkg=${prog##*:}
  command -v "$cmd" >/dev/null 2>&1 || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "storlab: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
  exit 1
fi
echo "storlab: installing ${need[*]} from Debian packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq "${need[@]}" >/dev/null
