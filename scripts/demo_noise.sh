#!/usr/bin/env bash
# How steady the demo's device is, and whether longer runs would help: 5 repeats of two
# configurations at two run lengths, interleaved (SHORT s then LONG s, five times; 3 and 8
# unless SHORT= and LONG= say otherwise), on a loop
# device with direct I/O over a 1 GiB file (as scripts/demo.sh builds it), fio random
# reads with direct=1 and 1 s of ramp-up. Prints each run's MB/s, the mean and the
# coefficient of variation, and the load average before and after. As root, ~3 minutes:
#   bash scripts/demo_noise.sh [DIR]        (the image goes to DIR, default /var/tmp)
set -euo pipefail
dir="${1:-/var/tmp}"
short_s="${SHORT:-3}" long_s="${LONG:-8}"
img="$(mktemp "$dir/storlab-noise.XXXXXX")"
loop=""
trap '[ -n "$loop" ] && losetup -d "$loop"; rm -f "$img"' EXIT
dd if=/dev/zero of="$img" bs=1M count=1024 oflag=direct status=none
loop="$(losetup --find --show --direct-io=on "$img")"
one() {
  fio --name=noise --filename="$loop" --direct=1 --rw=randread --time_based --ramp_time=1 \
      --group_reporting --output-format=json "$@" 2>/dev/null |
    python3 -c 'import json,sys; print(sum(j["read"]["bw_bytes"] for j in json.load(sys.stdin)["jobs"]) / 1e6)'
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for cfg in "--ioengine=libaio --iodepth=16 --numjobs=1 --bs=64k" \
           "--ioengine=io_uring --iodepth=16 --numjobs=4 --bs=256k --iodepth_batch_submit=16"; do
  short="" long=""
  for _ in 1 2 3 4 5; do
    # shellcheck disable=SC2086
    short="$short $(one --runtime="$short_s" $cfg)"; long="$long $(one --runtime="$long_s" $cfg)"
  done
  for pair in "$short_s:$short" "$long_s:$long"; do
    python3 -c 'import sys, statistics as s
v = [float(x) for x in sys.argv[2].split()]
print(f"{sys.argv[1]}: MB/s", " ".join(f"{x:.0f}" for x in v),
      f"mean {s.mean(v):.0f}, CV {100 * s.stdev(v) / s.mean(v):.1f} %")' \
      "$cfg, runtime=${pair%%:*} s" "${pair#*:}"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
