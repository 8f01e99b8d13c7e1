#!/usr/bin/env bash
# storlab's demo: tune fio on a block device this script creates, the way a storage engineer
# would want it done. The device is a loop device over a file on this machine's disk, with
# direct I/O (else a zram device); fio runs with direct=1, so the answer is about the
# device's queue depth, job count, block size and engine, not the page cache. Steps: a
# noise check (5 runs of one configuration), then `storlab tune` (a Latin Hypercube screen,
# Carver's importance, a focused search, confirmation re-runs compared with fio's defaults
# and the best screened configuration), the HTML report, and the closing summary.
#   bash scripts/demo.sh [OUT_DIR]     (make demo runs it with OUT_DIR=demo-out; as root)
# Runs again resume: finished runs are kept (delete OUT_DIR to start afresh). The device is
# removed when the script ends, also on Ctrl-C or an error.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-demo-out}"
STORLAB="${STORLAB:-.venv/bin/storlab}"
PYTHON="${PYTHON:-.venv/bin/python}"
SIZE_MB="${DEMO_SIZE_MB:-1024}"
NOISE_CONFIG="ioengine=libaio,iodepth=16,numjobs=1,bs=64k,iodepth_batch_submit=1"
start=$(date +%s)

command -v fio >/dev/null || { echo "demo: fio is not installed (make demo installs it as root)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "demo: creating a loop or zram device needs root (sudo make demo)" >&2; exit 1; }

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
IMG="$OUT/disk.img"
LOOP="" ZRAM="" RESUMED=""

cleanup() {
  set +e
  if [ -n "$LOOP" ]; then losetup -d "$LOOP" 2>/dev/null; echo "demo: detached $LOOP"; fi
  if [ -n "$ZRAM" ]; then
    echo 1 > "/sys/block/$ZRAM/reset"
    echo "${ZRAM#zram}" > /sys/class/zram-control/hot_remove
    echo "demo: removed /dev/$ZRAM"
  fi
  rm -f "$IMG"
}
trap cleanup EXIT
trap 'exit 130' INT TERM   # the EXIT trap removes the device

# A 1 GiB file written in full (a hole would be read as zeros without touching the disk),
# attached with direct I/O: the loop driver then reads the file with O_DIRECT, so neither
# fio nor the loop device reads from the page cache. `at` names the device to attach
# (a resumed campaign measured on that path); without it the first free one.
loop_device() {
  local at="${1:-}"
  dd if=/dev/zero of="$IMG" bs=1M count="$SIZE_MB" oflag=direct status=none 2>/dev/null || {
    echo "demo: the file system under $OUT takes no O_DIRECT writes"; return 1; }
  if [ -n "$at" ]; then
    losetup --direct-io=on "$at" "$IMG" 2>/dev/null || return 1
    LOOP="$at"
  else
    LOOP="$(losetup --find --show --direct-io=on "$IMG" 2>/dev/null)" || return 1
  fi
  if [ "$(cat "/sys/block/${LOOP#/dev/}/loop/dio")" != 1 ]; then
    echo "demo: $LOOP reads its file through the page cache (no direct I/O on $OUT's file system)"
    return 1
  fi
  DEVICE="$LOOP"
  local src fs
  read -r src fs < <(df --output=source,fstype "$IMG" | tail -1)
  DESCRIPTION="$LOOP, a loop device with direct I/O over a ${SIZE_MB} MiB file on $src ($fs)"
}

# zram: a compressed RAM disk, CPU-bound (its answer is about this machine's cores, not a disk).
zram_device() {
  local want="${1:-}" n
  [ -w /sys/class/zram-control/hot_add ] || return 1
  n="$(cat /sys/class/zram-control/hot_add)" || return 1
  ZRAM="zram$n"
  if [ -n "$want" ] && [ "/dev/$ZRAM" != "$want" ]; then return 1; fi
  echo "${SIZE_MB}M" > "/sys/block/$ZRAM/disksize"
  fio --name=fill --filename="/dev/$ZRAM" --rw=write --bs=1M --direct=1 \
      --output-format=terse >/dev/null 2>&1 || return 1
  DEVICE="/dev/$ZRAM"
  DESCRIPTION="/dev/$ZRAM, a ${SIZE_MB} MiB zram device (in RAM, compressed: CPU-bound)"
}

finished() {  # a tuning that ran to its end (tune.json is written at the end, or on Ctrl-C)
  [ -f "$OUT/tune.json" ] && [ -f "$OUT/noise.json" ] && "$PYTHON" -c \
    'import json,sys; sys.exit(json.load(open(sys.argv[1]))["interrupted"])' "$OUT/tune.json"
}

if [ -f "$OUT/campaign.yaml" ]; then
  DEVICE="$(sed -n 's/^ *filename: *\([^ ]*\).*/\1/p' "$OUT/campaign.yaml")"
  DESCRIPTION="$(cat "$OUT/device.txt" 2>/dev/null || echo "$DEVICE")"
  if finished; then
    RESUMED=resumed
    echo "demo: resumed: $OUT holds a finished tuning; its answer again, nothing re-run"
    echo "      (to start afresh: rm -rf $OUT, then make demo)"
  else
    echo "demo: resuming the tuning in $OUT: finished runs are kept, the rest run on $DEVICE"
    echo "      (to start afresh: rm -rf $OUT, then make demo)"
    case "$DEVICE" in
      /dev/loop*) loop_device "$DEVICE" ;;
      /dev/zram*) zram_device "$DEVICE" ;;
      *) false ;;
    esac || { echo "demo: cannot create $DEVICE again (taken?); start afresh: rm -rf $OUT" >&2; exit 1; }
  fi
else
  echo "== 1/4 device"
  loop_device || { [ -n "$LOOP" ] && losetup -d "$LOOP"; LOOP=""; echo "demo: using zram instead"; zram_device; } \
    || { echo "demo: neither a loop device nor zram could be created" >&2; exit 1; }
  echo "$DESCRIPTION" > "$OUT/device.txt"
  # The campaign's store, report and fio JSON live next to the campaign file: copy it into
  # OUT with the device's path in place of DEVICE.
  cp examples/fio-tuning/space.yaml "$OUT/"
  sed "s#filename: DEVICE#filename: $DEVICE#" examples/fio-tuning/campaign.yaml > "$OUT/campaign.yaml"
  echo "   $DESCRIPTION"
fi

if ! finished; then
  echo "== 2/4 noise check: 5 runs of $NOISE_CONFIG (4 s each)"
  "$STORLAB" confirm "$OUT/campaign.yaml" --config "$NOISE_CONFIG" --runs 5 --store noise.db \
    --quiet -o "$OUT/noise.json" >/dev/null
  echo "== 3/4 tune: 44 runs of 2 s random reads, direct=1 (screen -> importance -> search -> confirm), about 3-5 minutes"
fi
"$STORLAB" tune "$OUT/campaign.yaml" --plot "$OUT/tune.png" -o "$OUT/tune.json" \
  --optuna-storage "sqlite:///$OUT/study.db"

echo "== 4/4 report: $OUT/report.html (tuning section, results, effects)"
"$STORLAB" report "$OUT/campaign.yaml" -o "$OUT/report.html" >/dev/null
"$STORLAB" results "$OUT/campaign.yaml" --level run -o "$OUT/runs.csv" >/dev/null
echo
echo "== what the demo measured"
"$PYTHON" scripts/demo_summary.py "$OUT" "$DESCRIPTION" "$(( $(date +%s) - start ))" $RESUMED
echo "outputs in $OUT/: tune.json, tune.png, report.html, runs.csv, tune-fio/ (each run's fio"
echo "JSON), study.db (optuna-dashboard sqlite:///$OUT/study.db)"
