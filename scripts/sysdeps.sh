#!/usr/bin/env bash
# Install the Debian packages storlab's runners and tests drive, only when missing.
# Each scripts/sysdeps.d/*.txt lists "command package" pairs (one feature per file):
# the package is installed when the command is not on PATH.
#   bash scripts/sysdeps.sh            every list (make test)
#   bash scripts/sysdeps.sh fio ...    only sysdeps.d/fio.txt ... (make demo)
set -euo pipefail
cd "$(dirname "$0")"
lists=(sysdeps.d/*.txt)
if [ $# -gt 0 ]; then
  lists=()
  for name in "$@"; do
    [ -f "sysdeps.d/$name.txt" ] || { echo "storlab: no list scripts/sysdeps.d/$name.txt" >&2; exit 2; }
    lists+=("sysdeps.d/$name.txt")
  done
fi
need=()
for list in "${lists[@]}"; do
  while read -r cmd pkg; do
    case "$cmd" in ''|'#'*) continue ;; esac
    command -v "$cmd" >/dev/null 2>&1 || need+=("$pkg")
  done < "$list"
done
[ ${#need[@]} -eq 0 ] && exit 0
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
if [ "$(id -u)" -ne 0 ]; then
  echo "storlab: missing ${need[*]}; install them (apt-get install ${need[*]}) or run as root" >&2
  exit 1
fi
echo "storlab: installing ${need[*]} from Debian packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
