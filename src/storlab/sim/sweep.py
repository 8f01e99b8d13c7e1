"""What-if sweeps: a grid of overrides, each point simulated (or solved analytically) in
parallel on local processes or a Dask cluster, gathered into one table with a plot."""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .cluster import SimError, apply_overrides, build_model, parse_cluster, run_model


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


def grid(sweeps: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Full factorial of the sweep values, first factor varying slowest."""
    keys = list(sweeps)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(sweeps[k] for k in keys))]


def run_point(raw: Mapping[str, Any], overrides: Mapping[str, Any], analytic: bool = False,
              source: str = "cluster", backend: str = "rust") -> dict[str, Any]:
    """One grid point -> one flat row (module level so that processes and Dask can pickle it).
    A point that cannot be built is kept as a row with its error, the sweep goes on."""
    row: dict[str, Any] = dict(overrides)
    try:
        spec = parse_cluster(apply_overrides(raw, overrides, source), source)
        model = build_model(spec)
        if analytic:
            from .analytic import analyse
            rep: Any = analyse(model)
        else:
            rep = run_model(model, backend=backend)
    except SimError as exc:
        row["error"] = str(exc)
        return row
    total = rep.ops[rep.ops["op"] == "ALL"].iloc[0]
    row.update({"ops_s": float(total["ops_s"]), "mb_s": float(total["mb_s"]),
                "lat_mean_ms": float(total["lat_mean_ms"]),
                "lat_p99_ms": float(total["lat_p99_ms"]) if "lat_p99_ms" in total else np.nan,
                "bottleneck": rep.bottleneck["resource"],
                "bottleneck_util": float(rep.bottleneck["utilisation"])})
    for k, v in rep.metrics().items():
        if k.startswith("util_"):
            row[k] = v
    return row


@dataclass
class SweepResult:
    """The grid's results: one row per point, factor columns first."""

    factors: list[str]
    rows: pd.DataFrame
    analytic: bool

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


def run_sweep(raw: Mapping[str, Any], sweeps: Mapping[str, Sequence[Any]], *,
              analytic: bool = False, executor: str = "local", workers: int | None = None,
              source: str = "cluster", backend: str = "rust") -> SweepResult:
    """Run every grid point. `executor`: 'local' (processes), 'serial', or 'dask://host:port'
    (a running Dask scheduler; 'dask' alone starts a local Dask cluster)."""
    points = grid(sweeps)
    if not points:
        raise SimError(f"{source}: empty sweep")
    # Validate the first point here so a typo fails fast with one line.
    parse_cluster(apply_overrides(raw, points[0], source), source)
    args = [(dict(raw), p, analytic, source, backend) for p in points]
    if executor == "serial" or len(points) == 1:
        rows = [run_point(*a) for a in args]
    elif executor == "local":
        from concurrent.futures import ProcessPoolExecutor

        n = workers or min(len(points), os.cpu_count() or 1)
        with ProcessPoolExecutor(max_workers=n) as pool:
            rows = list(pool.map(run_point, *zip(*args)))
    elif executor.startswith("dask"):
        from dask.distributed import Client

        address = executor.removeprefix("dask://") if executor.startswith("dask://") else None
        try:
            client = Client(address) if address else Client(processes=True,
                                                             n_workers=workers or None)
        except OSError as exc:
            raise SimError(f"--executor {executor}: cannot reach the Dask scheduler ({exc})"
                           ) from None
        with client:
            futures = [client.submit(run_point, *a, pure=False) for a in args]
            rows = client.gather(futures)
    else:
        raise SimError(f"--executor {executor!r}: use local, serial, dask or dask://host:port")
    df = pd.DataFrame(rows)
    return SweepResult(list(sweeps), df, analytic)
