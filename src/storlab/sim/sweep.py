"""What-if sweeps: the sweep's axes (`--sweep NAME=V1,V2`) and its result table with a plot.

The sweep runs as a campaign (the full factorial of the axes, the simulator runner, the
campaign's executors and store, so it resumes after a kill): `storlab.campaign.sweep`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .cluster import SimError


def parse_sweep(items: Sequence[str], source: str = "--sweep") -> dict[str, list[str]]:
    """['nodes=4,8', 'disk=hdd,ssd'] -> {'nodes': ['4', '8'], 'disk': ['hdd', 'ssd']}."""
    out: dict[str, list[str]] = {}
    for item in items:
        key, sep, vals = item.partition("=")
        values = [v.strip() for v in vals.split(",") if v.strip()]
        if not sep or not key.strip() or not values:
            raise SimError(f"{source}: {item!r} is not NAME=V1,V2,...")
        out[key.strip()] = values
    return out


@dataclass
class SweepResult:
    """The grid's results: one row per point, factor columns first; `campaign` is the
    directory that keeps its runs (None for a throw-away sweep)."""

    factors: list[str]
    rows: pd.DataFrame
    analytic: bool
    campaign: Path | None = None

    def table(self) -> pd.DataFrame:
        df = self.rows.copy()
        if "ops_s" in df and len(df) and np.isfinite(df["ops_s"].iloc[0]):
            df["x_base"] = df["ops_s"] / df["ops_s"].iloc[0]  # speed-up over the first point
        return df

    def plot(self, metric: str = "ops_s"):
        """Throughput (and latency) against the first factor, one line per combination of
        the other factors."""
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        df = self.table()
        lat = "lat_mean_ms" if self.analytic else "lat_p99_ms"
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        x_name = self.factors[0]
        xs = list(dict.fromkeys(df[x_name].astype(str)))
        others = self.factors[1:]
        groups = df.groupby([df[o].astype(str) for o in others], sort=False) if others else [
            ((), df)]
        for key, g in groups:
            key = key if isinstance(key, tuple) else (key,)
            label = ", ".join(f"{o}={v}" for o, v in zip(others, key)) or "all"
            pos = [xs.index(v) for v in g[x_name].astype(str)]
            axes[0].plot(pos, g[metric], marker="o", label=label)
            axes[1].plot(pos, g[lat], marker="o", label=label)
        for ax, ylab in ((axes[0], metric), (axes[1], lat)):
            ax.set_xticks(range(len(xs)), xs)
            ax.set_xlabel(x_name)
            ax.set_ylabel(ylab)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=8)
        fig.suptitle("storlab simulate sweep" + (" (analytic)" if self.analytic else ""))
        fig.tight_layout()
        return fig
