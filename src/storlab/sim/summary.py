"""Summarising a simulated run: the steady-state window (MSER), batch-means confidence
intervals, utilisation, the bottleneck, and the SimReport holding it all."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .ops import DELETE, OPS
from .model import ClusterModel, Requests


# ---------------------------------------------------------------------------------------
# running and reporting
#: Resource classes that are token pools (HOLD), not hardware: their utilisation is the share
#: of workers taken, which includes the time spent waiting on the hardware they cover.
POOL_CLASSES = ("object_workers",)


def pick_bottleneck(util: Any) -> dict[str, Any]:
    """The busiest resource of a utilisation table. A worker pool counts: when its workers are
    all taken while the disks behind them are not, the pool is what binds (too few workers).
    When hardware is within 10 points of the busiest pool, the hardware is named: the pool is
    then busy mostly because it waits on that nearly saturated hardware."""
    top = util.sort_values("max", ascending=False, kind="stable").iloc[0]
    if top["resource"] in POOL_CLASSES:
        hw = util[~util["resource"].isin(POOL_CLASSES)]
        if len(hw) and float(hw["max"].max()) >= float(top["max"]) - 0.10:
            top = hw.sort_values("max", ascending=False, kind="stable").iloc[0]
    return {"resource": top["resource"], "station": top["busiest"],
            "utilisation": float(top["max"])}


def flat_metrics(ops: Any, util: Any, bottleneck: dict[str, Any],
                 keys: tuple[str, ...]) -> dict[str, float]:
    """One flat dict of a result's per-operation `keys` (prefixed get_/put_/..., none for
    ALL), the highest utilisation of each resource class and the bottleneck's."""
    out: dict[str, float] = {}
    for row in ops.to_dict("records"):
        pre = "" if row["op"] == "ALL" else f"{row['op'].lower()}_"
        for k in keys:
            out[f"{pre}{k}"] = float(row[k])
    for row in util.to_dict("records"):
        out[f"util_{row['resource']}"] = float(row["max"])
    out["bottleneck_util"] = float(bottleneck["utilisation"])
    return out


@dataclass
class SimReport:
    """One simulated run: per-op throughput and latency over the steady-state window (with
    batch-means 95 % confidence intervals), per-resource utilisation over the same window,
    the bottleneck, Little's-law checks, a time series, and the cost of simulating it."""

    name: str
    loop: str                      # "closed" | "open"
    requests: int                  # simulated, warm-up and drain included
    ops: Any                       # DataFrame: op, count, ops_s, mb_s, lat_* (ms), *_ci95
    util: Any                      # DataFrame: resource, stations, mean, max, busiest
    bottleneck: dict[str, Any]
    littles_law_error: float       # engine bookkeeping: |L - X R| / L over all stations
    station_littles_error: float   # worst station with >= 1000 visits
    events: int
    sim_time: float
    wall: float                    # engine seconds
    build_wall: float              # route building seconds
    notes: list[str] = field(default_factory=list)
    #: The measured window: from/to (s), seconds, requests counted, warm-up requests and
    #: drain seconds left out, batches used for the confidence intervals.
    window: dict[str, Any] = field(default_factory=dict)
    #: |L - X R| / L of the requests in the window (L: mean number in the system; closed
    #: loop without think time, L is the number of clients).
    littles_law_system: float = float("nan")
    timeseries: Any = None         # DataFrame: per interval t_from, t_to, phase, ops_s, ...
    #: Failure windows applied (storlab.sim.failures.describe_failures): what was down,
    #: when, how many requests it re-routed or failed.
    failures: list[dict[str, Any]] = field(default_factory=list)

    def table(self):
        return self.ops

    def metrics(self) -> dict[str, float]:
        """Flat numbers for campaigns: totals, per-op latency, utilisation per resource."""
        return flat_metrics(self.ops, self.util, self.bottleneck,
                            ("ops_s", "mb_s", "lat_mean_ms", "lat_p50_ms", "lat_p95_ms",
                             "lat_p99_ms"))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "loop": self.loop, "requests": self.requests,
                "window": self.window, "ops": self.ops, "utilisation": self.util,
                "bottleneck": self.bottleneck, "littles_law_system": self.littles_law_system,
                "littles_law_error": self.littles_law_error,
                "station_littles_error": self.station_littles_error,
                "events": self.events, "sim_time_s": self.sim_time, "engine_wall_s": self.wall,
                "build_wall_s": self.build_wall, "notes": self.notes,
                "failures": self.failures, "timeseries": self.timeseries}

    def plot(self):
        """Throughput, mean latency and the busiest station of each resource class per
        interval; the warm-up and drain left out of the figures are shaded."""
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        ts = self.timeseries
        mid = (ts["t_from"] + ts["t_to"]) / 2
        fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
        axes[0].plot(mid, ts["ops_s"], marker="o", ms=3, color="C0")
        axes[0].axhline(float(self.ops["ops_s"].iloc[0]), color="C0", ls="--", lw=1,
                        label="steady-state mean")
        axes[0].set_ylabel("throughput (requests/s)")
        axes[1].plot(mid, ts["lat_mean_ms"], marker="o", ms=3, color="C1")
        axes[1].axhline(float(self.ops["lat_mean_ms"].iloc[0]), color="C1", ls="--", lw=1,
                        label="steady-state mean")
        axes[1].set_ylabel("mean latency (ms)")
        for k, col in enumerate(c for c in ts.columns if c.startswith("util_")):
            axes[2].plot(mid, ts[col] * 100, marker="o", ms=3, color=f"C{k + 2}",
                         label=col.removeprefix("util_").replace("_", " "))
        axes[2].set_ylabel("busiest station (% busy)")
        axes[2].set_ylim(0, 105)
        axes[2].set_xlabel("simulated time (s)")
        axes[2].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        w = self.window
        for ax in axes:
            ax.grid(alpha=0.3)
            ax.axvspan(float(ts["t_from"].iloc[0]), w["from_s"], color="0.85", lw=0)
            ax.axvspan(w["to_s"], float(ts["t_to"].iloc[-1]), color="0.85", lw=0)
        end = float(ts["t_to"].iloc[-1])
        for k, f in enumerate(self.failures):  # failure windows, hatched on every panel
            if f["from_s"] <= 0 and f["to_s"] is None:
                continue                        # down for the whole run: nothing to mark
            for ax in axes:
                ax.axvspan(f["from_s"], end if f["to_s"] is None else f["to_s"],
                           facecolor="none", edgecolor="C3", hatch="//", lw=0, alpha=0.5,
                           label=f"down: {', '.join(f['down'])}" if ax is axes[0] and k < 3
                           else None)
        axes[0].legend(fontsize=8, loc="lower right")
        axes[0].set_title(f"{self.name}: {self.loop} loop, {self.requests:,} requests; "
                          "shaded: warm-up and drain (not measured)", fontsize=10)
        fig.tight_layout()
        return fig


#: Intervals the engine snapshots a run into (its time series), and batches of the
#: steady-state window for the batch-means confidence intervals.
INTERVALS = 100
BATCHES = 20


def window_marks(n: int, intervals: int = INTERVALS) -> np.ndarray:
    """Arrival counts at which the engine snapshots its stations: `intervals` equal shares
    of the arrivals, the last one at the last arrival (where the drain begins)."""
    k = max(1, min(intervals, n - 1))
    return np.unique(np.round(np.linspace(0, max(n - 1, 0), k + 1)).astype(np.int64))


def mser(x: np.ndarray) -> int:
    """MSER truncation point of a series of interval means (White 1997): the d that
    minimises the squared standard error of the mean of x[d:], searched in the first half."""
    x = np.asarray(x, dtype=float)
    if not np.any(np.isfinite(x)):
        return 0
    x = np.where(np.isfinite(x), x, np.nanmean(x))  # an interval with no finish: its mean
    k = x.size
    if k < 4:
        return 0
    tail = x[::-1]
    cnt = np.arange(1, k + 1)
    mean = np.cumsum(tail) / cnt
    var = np.cumsum(tail**2) / cnt - mean**2
    stat = (var / cnt)[::-1]  # stat[d]: over x[d:], k - d values
    return int(np.argmin(stat[: k // 2 + 1]))


#: Student's t 97.5 % quantiles for 1..30 degrees of freedom (a table: importing
#: scipy.stats costs about a second, more than summarising a run).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def _t95(dof: int) -> float:
    """Two-sided 95 % Student's t quantile (within 0.1 % beyond the table)."""
    if dof < 1:
        return float("nan")
    return _T975[dof - 1] if dof <= len(_T975) else 1.959964 + 2.4 / dof


def util_table(model: ClusterModel, U: np.ndarray) -> tuple[Any, dict[str, Any]]:
    """Utilisation per resource class (mean, max, the busiest station), busiest first, and
    the bottleneck it names."""
    import pandas as pd

    names = model.stations.names or [str(i) for i in range(U.size)]
    rows = []
    for cls in model.classes():
        idx = np.flatnonzero(model.station_class == cls)
        j = idx[np.argmax(U[idx])]
        rows.append({"resource": cls, "stations": idx.size, "mean": float(U[idx].mean()),
                     "max": float(U[j]), "busiest": names[j]})
    util = pd.DataFrame(rows).sort_values("max", ascending=False, ignore_index=True)
    return util, pick_bottleneck(util)


def summarise(model: ClusterModel, req: Requests, res: Any, build_wall: float = 0.0,
              notes: list[str] | None = None) -> SimReport:
    """Statistics over the steady-state window: from the warm-up's last arrival to the run's
    last arrival (after it, the population drains: in closed loop fewer clients remain).
    Throughput counts the requests that finish inside the window; latencies are theirs;
    utilisations come from the engine's snapshots at the window's edges. Without snapshots
    (`marks` not given to the engine) the window runs from the warm-up to the last finish."""
    import pandas as pd

    lat = res.finish - res.start
    closed = req.arrivals is None
    # The engine adds a last snapshot at the end of the run to the marked ones.
    snap_t = np.asarray(getattr(res, "snap_t", np.zeros(0)))[:-1]
    warm_rule = f"the first {res.warmup:,} requests (workload.warmup)"
    if snap_t.size >= 2:
        marks = window_marks(len(req))
        marks = marks if marks.size == snap_t.size else np.linspace(0, len(req) - 1,
                                                                    snap_t.size)
        # The window opens after the configured warm-up share, later when MSER finds the
        # interval series of throughput or latency still drifting (a slow transient).
        x, r = _interval_means(res, lat, snap_t)
        d_cfg = int(np.searchsorted(marks, res.warmup))
        d_mser = max(mser(x), mser(r))
        plan = model.extra.get("failures")
        if plan is not None and plan.starts.size > 1:
            # A failure window is what the run is about, not a transient: MSER would read
            # its dip as warm-up, so the window opens no later than the first failure.
            d_mser = min(d_mser, int(np.searchsorted(snap_t, plan.starts[1], side="right")) - 1)
        first = min(max(d_cfg, d_mser), snap_t.size - 2)
        if d_mser > d_cfg:
            warm_rule = (f"the first {int(marks[first]):,} requests (MSER: throughput or "
                         f"latency still drifting after workload.warmup's {res.warmup:,})")
        else:
            warm_rule = f"the first {int(marks[first]):,} requests (workload.warmup)"
        warm_req = int(marks[first])
        edges = snap_t[first:]
        t0, t1 = float(edges[0]), float(edges[-1])
        # Batches: consecutive intervals grouped into at most BATCHES.
        groups = np.array_split(np.arange(edges.size - 1), min(BATCHES, edges.size - 1))
        bedges = np.array([edges[g[0]] for g in groups] + [edges[-1]])
    else:
        t0 = res.stats_start
        t1 = float(res.finish[res.warmup:].max())
        bedges = np.array([t0, t1])
        first = None
        warm_req = int(res.warmup)
    if t1 <= t0:  # a degenerate run (all arrivals at once): count every finish after t0
        t1 = float(res.finish.max())
        bedges = np.array([t0, t1])
    m = (res.finish >= t0) & (res.finish < t1) if first is not None else (
        np.arange(len(req)) >= res.warmup)
    if req.ok is not None:
        m &= req.ok                 # failed requests: availability, not throughput
    span = t1 - t0
    # Batch means: per batch, the throughput and the mean latency of the requests that
    # finish in it; the spread of the batch means gives the confidence interval.
    batch = np.clip(np.searchsorted(bedges, res.finish, side="right") - 1, 0, None)
    nb = bedges.size - 1
    blen = np.diff(bedges)
    rows = []
    for code, name in [(None, "ALL"), *enumerate(OPS)]:
        sel = m if code is None else m & (req.op == code)
        k = int(sel.sum())
        if k == 0:
            continue
        la = lat[sel] * 1e3
        row = {"op": name, "count": k, "ops_s": k / span,
               "mb_s": float(req.size[sel].sum()) / span / 1e6 if code != DELETE else 0.0,
               "lat_mean_ms": float(la.mean()),
               "lat_p50_ms": float(np.percentile(la, 50)),
               "lat_p95_ms": float(np.percentile(la, 95)),
               "lat_p99_ms": float(np.percentile(la, 99))}
        if nb >= 2:
            bi = batch[sel]
            cnt = np.bincount(bi, minlength=nb)[:nb]
            xb = cnt / blen
            lb = np.bincount(bi, weights=la, minlength=nb)[:nb]
            ok = cnt > 0
            rb = lb[ok] / cnt[ok]
            row["ops_s_ci95"] = _t95(nb - 1) * float(np.std(xb, ddof=1)) / math.sqrt(nb)
            row["lat_mean_ci95_ms"] = (_t95(rb.size - 1) * float(np.std(rb, ddof=1))
                                       / math.sqrt(rb.size) if rb.size >= 2 else float("nan"))
        rows.append(row)
    if code_all := [r for r in rows if r["op"] == "ALL"]:
        code_all[0]["mb_s"] = sum(r["mb_s"] for r in rows if r["op"] != "ALL")
    ops = pd.DataFrame(rows)
    servers = np.asarray(res.servers, dtype=float)
    if first is not None:
        u = (res.snap_busy[-2] - res.snap_busy[first]) / (servers * span)
    else:
        u = res.utilisation()
    util, bottleneck = util_table(model, u)
    notes = list(notes or [])
    pools = util[util["resource"].isin(POOL_CLASSES)]
    if len(pools) and float(pools["max"].iloc[0]) > 0.95:
        notes.append(f"object-server workers busy {float(pools['max'].iloc[0]):.0%} "
                     f"({pools['busiest'].iloc[0]}): requests wait for a worker; more "
                     "object_workers may help")
    # Little's law from the engine's own integrals: time-average number present (area)
    # against throughput x residence (sum of completed visit times), over all stations and
    # per station. Only boundary effects (visits in progress when the window opens) remain.
    ll = abs(float(res.area.sum()) - float(res.residence.sum())) / max(float(res.area.sum()),
                                                                         1e-300)
    busy_st = res.completions >= 1000
    if busy_st.any():
        Ls = res.area[busy_st]
        st_err = float(np.max(np.abs(Ls - res.residence[busy_st]) / np.maximum(Ls, 1e-300)))
    else:
        st_err = 0.0
    # The system's Little's law over the window: L (time-average requests in the system,
    # from each request's overlap with the window) against X x R of the counted requests.
    overlap = np.clip(np.minimum(res.finish, t1) - np.maximum(res.start, t0), 0.0, None)
    L = float(overlap.sum()) / span
    X = float(m.sum()) / span
    R = float(lat[m].mean()) if m.any() else 0.0
    ll_sys = abs(L - X * R) / L if L > 0 else float("nan")
    if ll_sys > 0.02:
        notes.append(f"Little's law over the window is off by {ll_sys:.1%}: latency drifts "
                     "slowly against the window's length; simulate more requests")
    window = {"from_s": t0, "to_s": t1, "seconds": span, "requests": int(m.sum()),
              "warmup_requests": warm_req, "warmup_rule": warm_rule,
              "drain_s": float(res.sim_time) - t1, "batches": int(nb),
              "rule": ("requests finishing between the warm-up's last arrival and the run's "
                       "last arrival (after it the population drains)") if first is not None
              else "requests after the warm-up, to the last finish (no engine snapshots)"}
    ts = _timeseries(model, req, res, lat, t0, t1) if first is not None else None
    return SimReport(name=model.spec.name, loop="closed" if closed else "open",
                     requests=len(req), ops=ops, util=util, bottleneck=bottleneck,
                     littles_law_error=ll, station_littles_error=st_err, events=res.events,
                     sim_time=res.sim_time, wall=res.wall, build_wall=build_wall,
                     notes=notes, window=window, littles_law_system=ll_sys, timeseries=ts)


def _interval_means(res: Any, lat: np.ndarray, edges: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Throughput and mean latency of the requests finishing in each interval."""
    nb = edges.size - 1
    b = np.searchsorted(edges, res.finish, side="right") - 1
    ok = (b >= 0) & (b < nb)
    cnt = np.bincount(b[ok], minlength=nb)[:nb]
    ls = np.bincount(b[ok], weights=lat[ok], minlength=nb)[:nb]
    with np.errstate(invalid="ignore", divide="ignore"):
        return cnt / np.diff(edges), np.where(cnt > 0, ls / np.maximum(cnt, 1), np.nan)


def _timeseries(model: ClusterModel, req: Requests, res: Any, lat: np.ndarray, t0: float,
                t1: float) -> Any:
    """Per interval between snapshots (then the drain, to the last event): throughput and
    mean latency of the requests finishing in it, and each resource class's busiest
    station's utilisation."""
    import pandas as pd

    edges, busy = res.snap_t, res.snap_busy
    keep = np.flatnonzero(np.diff(edges) > 0)
    nb = edges.size - 1
    b = np.searchsorted(edges, res.finish, side="right") - 1
    b = np.where(res.finish == edges[-1], nb - 1, b)
    ok = (b >= 0) & (b < nb)
    cnt = np.bincount(b[ok], minlength=nb)[:nb]
    ls = np.bincount(b[ok], weights=lat[ok], minlength=nb)[:nb]
    dt = np.diff(edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {"t_from": edges[:-1], "t_to": edges[1:],
               "phase": np.where(edges[1:] <= t0 + 1e-12, "warmup",
                                 np.where(edges[:-1] >= t1 - 1e-12, "drain", "steady")),
               "ops_s": cnt / dt, "lat_mean_ms": np.where(cnt > 0, ls / np.maximum(cnt, 1), np.nan)
               * 1e3}
        servers = np.asarray(res.servers, dtype=float)
        ub = np.diff(busy, axis=0) / (servers[None, :] * dt[:, None])
        for cls in model.classes():
            out[f"util_{cls}"] = ub[:, model.station_class == cls].max(axis=1)
    return pd.DataFrame(out).iloc[keep].reset_index(drop=True)
