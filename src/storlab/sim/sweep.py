"""What-if sweeps: the sweep's axes (`--sweep NAME=V1,V2`) and its result table with a plot.

The sweep runs as a campaign (the full factorial of the axes, the simulator runner, the
campaign's executors and store, so it resumes after a kill): `storlab.campaign.sweep_campaign`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..jsonutil import to_jsonable
from ..result_shape import Result
from ..errors import SimError


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
class SweepResult(Result):
    """The grid's results: one row per point, factor columns first; `campaign` is the
    directory that keeps its runs (None for a throw-away sweep)."""

    PLOT_KINDS = ("lines",)
    ERROR = SimError

    factors: list[str]
    rows: pd.DataFrame
    analytic: bool
    campaign: Path | None = None

    def to_frame(self) -> pd.DataFrame:
        df = self.rows.copy()
        if "availability" in df:  # points without failures lose no request
            ran = df["error"].isna() if "error" in df else np.ones(len(df), dtype=bool)
            df.loc[ran & df["availability"].isna(), "availability"] = 1.0
        if "ops_s" in df and len(df) and np.isfinite(df["ops_s"].iloc[0]):
            df["x_base"] = df["ops_s"] / df["ops_s"].iloc[0]  # speed-up over the first point
        return df

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({"factors": self.factors, "analytic": self.analytic,
                            "campaign": None if self.campaign is None else str(self.campaign),
                            "points": self.to_frame(), "notes": self.notes})

    @property
    def notes(self) -> list[str]:
        """What a reader must know to compare the points (today: unequal outage shares)."""
        share = self.rows["down_share"].dropna() if "down_share" in self.rows else []
        if len(share) > 1 and float(share.max() - share.min()) > 0.05:
            return [f"the failure windows cover {share.min():.0%} to {share.max():.0%} of "
                    "the measured window across points (failure times are absolute, run "
                    "lengths follow the axes): throughput and availability compare "
                    "different outage shares; see down_share"]
        return []

    def plot(self, kind: str | None = None, metric: str = "ops_s"):  # noqa: ANN201 - Figure
        """`lines` (the only kind): throughput (and latency) against the first factor, one
        line per combination of the other factors."""
        self.plot_kind(kind)
        from ..plotstyle import (LINESTYLES, MARKERS, PALETTE, axis_label, format_axis,
                                 styled, subplots)

        df = self.to_frame()
        lat = "lat_mean_ms" if self.analytic else "lat_p99_ms"
        x_name = self.factors[0]
        xs = list(dict.fromkeys(df[x_name].astype(str)))
        others = self.factors[1:]
        groups = df.groupby([df[o].astype(str) for o in others], sort=False) if others else [
            ((), df)]
        with styled():
            fig, axes = subplots(1, 2, figsize=(11, 4.2))
            for i, (key, g) in enumerate(groups):
                key = key if isinstance(key, tuple) else (key,)
                label = ", ".join(f"{o}={v}" for o, v in zip(others, key)) or "all points"
                pos = [xs.index(v) for v in g[x_name].astype(str)]
                style = {"color": PALETTE[i % len(PALETTE)], "ls": LINESTYLES[i % 4],
                         "marker": MARKERS[i % len(MARKERS)]}
                axes[0].plot(pos, g[metric], label=label, **style)
                axes[1].plot(pos, g[lat], **style)
            for ax, col in ((axes[0], metric), (axes[1], lat)):
                ax.set_xticks(range(len(xs)), xs)
                ax.set_xlabel(x_name)
                ax.set_ylabel(axis_label(col))
                format_axis(ax.yaxis, col)
                top = float(np.nanmax(df[col])) if len(df) else 1.0
                ax.set_ylim(0, top * 1.08 if top > 0 else 1.0)  # room above the top line
            if others:  # which line is which, beside the panels so it covers no data
                fig.legend(loc="outside right upper", title=", ".join(others),
                           title_fontsize=8)
            fig.suptitle("Simulated sweep over " + ", ".join(self.factors)
                         + (" (analytic model)" if self.analytic else ""))
        return fig
