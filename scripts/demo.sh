#!/usr/bin/env bash
# storlab's main demo: tune fio on this machine in 60 runs, the way a storage engineer would
# want it done: screen (a Latin Hypercube), rank the knobs (Carver's importance), search the
# ones the screening left open (Optuna TPE), then re-run the best candidates, fio's defaults
# and the best screened configuration, and compare them (Welch). Every run is real fio.
#   bash scripts/demo.sh [OUT_DIR]     (make demo runs it with OUT_DIR=demo-out)
# Runs again resume: finished runs are kept (delete OUT_DIR to start over).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-demo-out}"
STORLAB="${STORLAB:-.venv/bin/storlab}"
command -v fio >/dev/null || { echo "demo: fio is not installed (make sysdeps)" >&2; exit 1; }

mkdir -p "$OUT"
# The campaign's store and scratch files live next to the campaign file: copy it into OUT.
cp examples/fio-tuning/campaign.yaml examples/fio-tuning/space.yaml "$OUT/"

echo "== 1/2 tune: 60 runs of 2-s fio (screen -> importance -> local steps, TPE -> confirm), about 2.5 minutes"
"$STORLAB" tune "$OUT/campaign.yaml" --plot "$OUT/tune.png" -o "$OUT/tune.json"

echo "== 2/2 report: $OUT/report.html (tuning section, results, effects)"
"$STORLAB" report "$OUT/campaign.yaml" -o "$OUT/report.html" >/dev/null
"$STORLAB" results "$OUT/campaign.yaml" --level run -o "$OUT/runs.csv" >/dev/null
echo "demo: outputs in $OUT/ (tune.db, tune.json, tune.png, runs.csv, report.html)"
