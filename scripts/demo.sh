#!/usr/bin/env bash
# storlab's main demo: a Plackett-Burman screening of fio parameters (seed 002's list,
# trimmed for a scratch file) run for real with fio, stored, exported and analysed.
#   bash scripts/demo.sh [OUT_DIR]     (make demo runs it with OUT_DIR=demo-out)
# Runs again resume: finished runs are kept (delete OUT_DIR to start over).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-demo-out}"
STORLAB="${STORLAB:-.venv/bin/storlab}"
command -v fio >/dev/null || { echo "demo: fio is not installed (make sysdeps)" >&2; exit 1; }

mkdir -p "$OUT"
# The campaign's store and scratch files live next to the campaign file: copy it into OUT.
cp examples/fio-screening/campaign.yaml examples/fio-screening/space.yaml "$OUT/"

echo "== 1/4 run: 12 PB configurations x 2 repetitions of 2-s fio runs (a few minutes)"
"$STORLAB" run "$OUT/campaign.yaml"

echo "== 2/4 results -> $OUT/results.csv (configuration averages), $OUT/runs.csv (per run)"
"$STORLAB" results "$OUT/campaign.yaml" -o "$OUT/results.csv"
"$STORLAB" results "$OUT/campaign.yaml" --level run -o "$OUT/runs.csv"

echo "== 3/4 analyze: ranked effects on total bandwidth (log scale: knobs multiply throughput), and a recommendation"
# The per-repetition rows: the two repetitions give the ANOVA its pure error (12 df), which
# a saturated 12-run PB of 11 factors does not have on configuration averages.
"$STORLAB" analyze "$OUT/runs.csv" --response total_bw_bytes --space "$OUT/space.yaml" \
    --transform log -o "$OUT/effects.json" --json >/dev/null
"$STORLAB" analyze "$OUT/runs.csv" --response total_bw_bytes --space "$OUT/space.yaml" \
    --transform log

echo "== 4/4 confirm: the recommended configuration against the best measured one, 3 runs each"
PY="$(dirname "$STORLAB")/python"
"$PY" scripts/demo_confirm.py prepare "$OUT" total_bw_bytes
"$STORLAB" run "$OUT/confirm.yaml"
"$STORLAB" results "$OUT/confirm.yaml" --level run -o "$OUT/confirm_runs.csv"
"$PY" scripts/demo_confirm.py compare "$OUT" total_bw_bytes
echo "demo: outputs in $OUT/ (campaign.db, results.csv, runs.csv, effects.json, confirm.db)"
