"""The demo's closing lines (scripts/demo.sh): the device, what the noise check measured,
the recommendation with its 95 % interval, the comparisons and how noisy each confirmed
configuration was, read from the JSON files `storlab confirm` and `storlab tune` wrote.

    python scripts/demo_summary.py OUT_DIR DEVICE_DESCRIPTION WALL_SECONDS [resumed]"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from scipy import stats


def gbs(v: float) -> str:
    """Bytes per second as the demo prints them (fio's MB are 10^6 bytes too)."""
    return f"{v / 1e9:.2f} GB/s" if v >= 1e9 else f"{v / 1e6:.1f} MB/s"


def cv(values: list[float]) -> float:
    """Coefficient of variation in percent (sample standard deviation over the mean)."""
    if len(values) < 2:
        return math.nan
    m = sum(values) / len(values)
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))
    return 100 * sd / m if m else math.nan


def interval(values: list[float]) -> tuple[float, float]:
    """The 95 % t-interval of the mean."""
    n = len(values)
    m = sum(values) / n
    if n < 2:
        return m, m
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    h = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    return m - h, m + h


def config_text(cfg: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in cfg.items())


def main(out: Path, device: str, wall: float, resumed: bool = False) -> None:
    tune = json.loads((out / "tune.json").read_text())
    noise = json.loads((out / "noise.json").read_text())
    print(f"device: {device}")
    n = noise["configs"][0]
    print(f"noise check: {n['runs']} runs of {config_text(n['config'])}: "
          + ", ".join(gbs(v) for v in n["values"])
          + f"; mean {gbs(n['mean'])}, run-to-run spread (CV) {cv(n['values']):.1f} %")
    best = tune["best"]
    # the race's interval (simultaneous over the raced candidates) when the tuning raced
    lo, hi = best.get("interval") or interval(best["values"])
    print(f"recommended: {config_text(best['config'])}")
    print(f"  {gbs(best['value'])}, 95 % interval {gbs(lo)} .. {gbs(hi)} "
          f"({best['runs']} confirmation runs, CV {cv(best['values']):.1f} %)")
    race = tune.get("race") or {}
    tied = [c for c in race.get("tied", []) if c != best["config"]]
    if tied:
        print(f"  not separated from {len(tied)} other candidate(s) at "
              f"{100 * race['confidence']:.0f} % within the budget; chosen: {race['tie_rule']}")
    for label, key, cmp_key in (("fio's defaults", "baseline", "comparison"),
                                ("best screened", "best_screened", "comparison_screened")):
        e, c = tune.get(key), tune.get(cmp_key)
        if e is None or c is None:
            continue
        ch = c.get("change")
        change = f"{c['difference']:+.3g} B/s" if ch is None else \
            f"{1 + ch:.0f}x" if ch >= 2 else f"{100 * ch:+.1f} %"  # 190x, not +18900 %
        spread = f"CV {cv(e['values']):.1f} %" if len(e["values"]) > 1 else "1 run"
        print(f"  vs {label} ({config_text(e['config'])}): {gbs(e['value'])} "
              f"({spread}): recommended {change}, {c['verdict']}")
    spreads = [cv(c["values"]) for c in tune["candidates"] if len(c["values"]) > 1]
    if spreads:
        print(f"noise in the confirmation: CV {min(spreads):.1f} % to {max(spreads):.1f} % "
              f"over the {len(spreads)} configurations re-run")
    m, s = divmod(round(wall), 60)
    if resumed:
        print(f"wall time of this call: {m} min {s:02d} s (resumed: nothing measured again)")
    else:
        print(f"wall time: {m} min {s:02d} s ({tune['runs']} tuning runs, {n['runs']} noise "
              "runs)")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4:] == ["resumed"])
