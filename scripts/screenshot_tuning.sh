#!/usr/bin/env bash
# A PNG of a report's tuning section as headless Chromium draws it (the README's picture):
#   bash scripts/screenshot_tuning.sh demo-out/report.html docs/demo-tuning.png
# The other sections are hidden by a style rule in a temporary copy of the page.
set -euo pipefail
src="$1" png="$2"
tmp="$(mktemp --suffix=.html)"
trap 'rm -f "$tmp"' EXIT
sed 's#</head>#<style>section:not(\#tuning), nav.toc { display: none !important; }</style></head>#' \
  "$src" > "$tmp"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,1250 \
  --screenshot="$png" "file://$tmp" 2>/dev/null
