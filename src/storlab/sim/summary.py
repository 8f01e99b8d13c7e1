"""Summarising a simulated run: the steady-state window (MSER), batch-means confidence
intervals, utilisation, the bottleneck, and the SimReport holding it all."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import SimError
from ..jsonutil import to_jsonable
from ..result_shape import Result
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
class SimReport(Result):
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
    engine_cpu: float = float("nan")   # CPU seconds in the engine (a streamed run)
    #: Failure windows applied (storlab.sim.failures.describe_failures): what was down,
    #: when, how many requests it re-routed or failed.
    failures: list[dict[str, Any]] = field(default_factory=list)

    PLOT_KINDS = ("timeseries",)
    ERROR = SimError

    def to_frame(self):  # noqa: ANN201 - DataFrame (pandas is not imported here)
        return self.ops

    def metrics(self) -> dict[str, float]:
        """Flat numbers for campaigns: totals, per-op latency, utilisation per resource."""
        return flat_metrics(self.ops, self.util, self.bottleneck,
                            ("ops_s", "mb_s", "lat_mean_ms", "lat_p50_ms", "lat_p95_ms",
                             "lat_p99_ms"))

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({"name": self.name, "loop": self.loop, "requests": self.requests,
                "window": self.window, "ops": self.ops, "utilisation": self.util,
                "bottleneck": self.bottleneck, "littles_law_system": self.littles_law_system,
                "littles_law_error": self.littles_law_error,
                "station_littles_error": self.station_littles_error,
                "events": self.events, "sim_time_s": self.sim_time, "engine_wall_s": self.wall,
                "build_wall_s": self.build_wall, "notes": self.notes,
                "failures": self.failures, "timeseries": self.timeseries})

    def plot(self, kind: str | None = None):  # noqa: ANN201 - matplotlib Figure
        """`timeseries` (the only kind): throughput, mean latency and the busiest station of
        each resource class per interval; the warm-up and drain left out are shaded."""
        # A detached Figure (no pyplot): drawing never picks or switches the backend of
        # the notebook or program that asked for it; the CLI picks its own.
        from ..plotstyle import subplots

        self.plot_kind(kind)
        ts = self.timeseries
        mid = (ts["t_from"] + ts["t_to"]) / 2
        fig, axes = subplots(3, 1, figsize=(9, 8), sharex=True, layout=None)
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
#: Finishes per interval an operation needs before its own series joins the warm-up rule.
OP_MSER_MIN = 20


def window_end(n: int, clients: int | None = None) -> int:
    """The arrival (0-based, in arrival order) that closes the steady-state window: the
    last one in an open loop; in a closed loop of N clients arrival n - N. A closed loop
    hands request k to the client whose request just finished, so the first client leaves
    at finish n - N + 1, and every finish before it had arrived: arrival n - N comes while
    all N clients are still in the loop. With think time the last arrival comes much later
    (the longest of the thinking clients' think times after the last hand-out), and a
    window run to it counted a shrinking population (X (R + Z) / N fell to 0.985 at 512
    clients). Both ends of the window are arrival epochs of a fixed population, which see
    the same stationary state (the arrival theorem), so the window is unbiased."""
    if clients is None or clients >= n:
        return max(n - 1, 0)
    return n - int(clients)


def window_marks(n: int, clients: int | None = None, intervals: int = INTERVALS) -> np.ndarray:
    """Arrival counts at which the engine snapshots its stations: `intervals` equal shares
    of the arrivals up to `window_end` (where the drain begins; `clients`: a closed loop's
    population, None in an open loop)."""
    # The open loop's grid (so the configured warm-up share falls on a mark), cut at the end.
    k = max(1, min(intervals, n - 1))
    grid = np.unique(np.round(np.linspace(0, max(n - 1, 0), k + 1)).astype(np.int64))
    end = window_end(n, clients)
    return np.append(grid[grid < end], end) if end > 0 else grid[:1]


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


def t95(dof: int) -> float:
    """Two-sided 95 % Student's t quantile (within 0.1 % beyond the table)."""
    if dof < 1:
        return float("nan")
    return _T975[dof - 1] if dof <= len(_T975) else 1.959964 + 2.4 / dof


def _lag1(x: np.ndarray) -> float:
    """Lag-1 autocorrelation of a series (0 for a constant one)."""
    d = x - x.mean()
    den = float(d @ d)
    return float(d[:-1] @ d[1:]) / den if den > 0 else 0.0


def batch_ci(num: np.ndarray, den: np.ndarray) -> float:
    """95 % half-width of the batch means num / den (batches with den > 0). Batch means
    must be nearly independent for the interval to hold: while their lag-1
    autocorrelation is significant (above 2 / sqrt(batches)) and 10 or more remain,
    neighbours are merged (sums added), after Fishman and Yarberry's LBatch rule ("An
    implementation of the batch means method", INFORMS Journal on Computing, 1997). A
    closed loop's per-operation latency can swing for thousands of requests while the
    total holds (after a failure, PUT latency went 55 -> 27 -> 55 ms over 15,000 requests
    with the total steady at 55 ms); twenty batches of a short run then gave an interval
    three times too narrow."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    while True:
        ok = den > 0
        m = num[ok] / den[ok]
        if m.size < 2:
            return float("nan")
        if m.size < 10 or _lag1(m) <= 2.0 / math.sqrt(m.size):
            return t95(m.size - 1) * float(np.std(m, ddof=1)) / math.sqrt(m.size)
        # Merge pairs; an odd last batch joins the pair before it.
        pair = np.minimum(np.arange(num.size) // 2, num.size // 2 - 1)
        num = np.bincount(pair, weights=num)
        den = np.bincount(pair, weights=den)


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


#: Latency percentiles come from log-spaced histograms kept per interval and operation (a
#: run's window is only chosen at its end, and memory must not grow with the requests):
#: HIST_PER_OCTAVE bins per doubling from 2**_LOG2_MIN s (1 ns) to 2**_LOG2_MAX s, a value
#: reported at its bin's geometric centre. A percentile is within LAT_REL_ERR (0.27 %) of
#: numpy's exact `percentile` of the same latencies, or 1 ns below that (bin 0 holds
#: [0, 1 ns) and reads 0).
HIST_PER_OCTAVE = 128
_LOG2_MIN, _LOG2_MAX = -30, 24
HIST_BINS = 1 + (_LOG2_MAX - _LOG2_MIN) * HIST_PER_OCTAVE
LAT_REL_ERR = 2.0 ** (1.0 / (2 * HIST_PER_OCTAVE)) - 1.0


def lat_bin(lat: np.ndarray) -> np.ndarray:
    """Histogram bin of each latency (seconds)."""
    lat = np.asarray(lat, dtype=float)
    with np.errstate(divide="ignore"):
        x = np.floor((np.log2(np.maximum(lat, 2.0 ** (_LOG2_MIN - 1))) - _LOG2_MIN)
                     * HIST_PER_OCTAVE)
    return np.where(lat < 2.0 ** _LOG2_MIN, 0, np.clip(x + 1, 1, HIST_BINS - 1)).astype(np.int64)


def bin_value(b: np.ndarray | int) -> np.ndarray:
    """The latency (seconds) a bin stands for: its geometric centre; 0 for bin 0."""
    b = np.asarray(b)
    return np.where(b == 0, 0.0, 2.0 ** (_LOG2_MIN + (b - 0.5) / HIST_PER_OCTAVE))


def hist_percentile(counts: np.ndarray, q: float) -> float:
    """numpy's default ('linear') percentile of the values a histogram holds, each read at
    its bin's value: the two order statistics around the rank, interpolated."""
    cum = np.cumsum(counts)
    k = int(cum[-1])
    h = (k - 1) * q / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, k - 1)
    v = bin_value(np.searchsorted(cum, [lo, hi], side="right"))
    return float(v[0] + (h - lo) * (v[1] - v[0]))


class Tally:
    """A run's statistics gathered while its requests finish, in memory that does not grow
    with the run: per interval between the engine's snapshots (the last one: after the last
    arrival, the drain) the count and summed latency of every finishing request, the time
    requests spend in the system, and per operation the successful requests' count, bytes,
    summed latency and latency histogram. The steady-state window (chosen at the end, by
    MSER over the intervals) is a run of whole intervals, so every figure of `summarise`
    comes from these sums. Requests are assigned to intervals once no snapshot can come
    before their finish (finish < the engine's clock); without snapshots (one request) the
    records are kept as they are."""

    def __init__(self, n: int, warmup: int, marks: np.ndarray,
                 fail_starts: np.ndarray | None = None) -> None:
        self.n, self.warmup = int(n), int(warmup)
        self.marks = np.asarray(marks)
        K = self.marks.size
        self.K = K
        self.keep = K < 2
        n_ops = len(OPS)
        self.cnt_all = np.zeros(K, dtype=np.int64)
        self.lat_all = np.zeros(K)
        self.area = np.zeros(K)
        self.full = np.zeros(K + 1, dtype=np.int64)   # difference array: intervals spanned
        self.cnt = np.zeros((K, n_ops), dtype=np.int64)
        self.lat = np.zeros((K, n_ops))
        self.size = np.zeros((K, n_ops))
        self.hist = np.zeros((K, n_ops, HIST_BINS), dtype=np.int32) if not self.keep else None
        self.fmax = -math.inf
        self.at_max: list[np.ndarray] = []     # [op, ok, lat, size] rows finishing at fmax
        self.pend: list[np.ndarray] = []       # records waiting for their interval
        self.kept: list[np.ndarray] = []       # without snapshots: every record
        # With failure epochs starting at `fail_starts`: the successful requests' count and
        # summed latency (ms) per interval and epoch of their finish (the failure windows'
        # rates, storlab.sim.failures.window_rates_from_sums); `win`: the window's intervals.
        self.fail_starts = fail_starts
        E = 0 if fail_starts is None else int(np.asarray(fail_starts).size)
        self.fcnt = np.zeros((K, E), dtype=np.int64)
        self.flat = np.zeros((K, E))
        self.win: np.ndarray | None = None

    def add(self, idx: np.ndarray, start: np.ndarray, finish: np.ndarray, op: np.ndarray,
            size: np.ndarray, ok: np.ndarray, now: float, edges: np.ndarray,
            final: bool = False) -> None:
        """Requests that finished: index, arrival, finish, op, bytes, success. `edges`: the
        snapshot times so far; `now`: the engine's clock (later finishes wait); `final`:
        the run is over and `edges` complete."""
        rec = np.stack([idx.astype(float), start, finish, op.astype(float),
                        size.astype(float), ok.astype(float)]) if idx.size else np.zeros((6, 0))
        if self.keep:
            self.kept.append(rec)
            return
        if self.pend:
            rec = np.concatenate([*self.pend, rec], axis=1)
            self.pend = []
        if not final:
            later = rec[2] >= now
            if later.any():
                self.pend.append(rec[:, later])
                rec = rec[:, ~later]
        if rec.shape[1]:
            self._assign(rec, np.asarray(edges, dtype=float))

    def _assign(self, rec: np.ndarray, edges: np.ndarray) -> None:
        _, s, f, opf, size, okf = rec
        op, ok = opf.astype(np.int64), okf > 0
        K = self.K
        lat = f - s
        bf = np.clip(np.searchsorted(edges, f, side="right") - 1, 0, K - 1)
        bs = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, K - 1)
        self.cnt_all += np.bincount(bf, minlength=K)
        self.lat_all += np.bincount(bf, weights=lat, minlength=K)
        # Time in the system per interval: the part of [start, finish) inside each.
        same = bs == bf
        self.area += np.bincount(bs[same], weights=lat[same], minlength=K)
        d = ~same
        if d.any():
            self.area += np.bincount(bs[d], weights=edges[bs[d] + 1] - s[d], minlength=K)
            self.area += np.bincount(bf[d], weights=f[d] - edges[bf[d]], minlength=K)
            self.full += np.bincount(bs[d] + 1, minlength=K + 1)
            self.full -= np.bincount(bf[d], minlength=K + 1)
        n_ops = len(OPS)
        g = bf[ok] * n_ops + op[ok]
        self.cnt += np.bincount(g, minlength=K * n_ops).reshape(K, n_ops)
        self.lat += np.bincount(g, weights=lat[ok], minlength=K * n_ops).reshape(K, n_ops)
        self.size += np.bincount(g, weights=size[ok], minlength=K * n_ops).reshape(K, n_ops)
        hb = g * HIST_BINS + lat_bin(lat[ok])
        if hb.size:
            # A bincount over the few intervals these requests finish in (np.add.at took a
            # quarter of the tally's time; a bincount over the whole histogram, more).
            lo = int(hb.min())
            flat = self.hist.reshape(-1)
            cnt = np.bincount(hb - lo)
            flat[lo:lo + cnt.size] += cnt.astype(flat.dtype)
        if self.fail_starts is not None:
            E = self.fcnt.shape[1]
            e = np.clip(np.searchsorted(self.fail_starts, f[ok], side="right") - 1, 0, E - 1)
            ge = bf[ok] * E + e
            self.fcnt += np.bincount(ge, minlength=K * E).reshape(K, E)
            self.flat += np.bincount(ge, weights=lat[ok] * 1e3, minlength=K * E).reshape(K, E)
        m = float(f.max())
        if m >= self.fmax:
            if m > self.fmax:
                self.fmax, self.at_max = m, []
            top = f == m
            self.at_max.append(np.stack([opf[top], okf[top], lat[top], size[top]]))

    def finish(self, model: ClusterModel, res: Any, closed: bool, build_wall: float,
               notes: list[str] | None) -> SimReport:
        """The report, from the sums and the engine's station integrals (`res`)."""
        if self.keep:
            return self._finish_kept(model, res, closed, build_wall, notes)
        import pandas as pd

        K = self.K
        edges = np.asarray(res.snap_t)[:-1]
        if edges.size != K:
            raise ValueError(f"the engine took {edges.size} snapshots, {K} were asked")
        dt = np.diff(edges)
        area = self.area.copy()
        full = np.cumsum(self.full)[:K]
        area[:K - 1] += full[:K - 1] * dt
        # The window opens after the configured warm-up share, later when MSER finds the
        # interval series of throughput or latency still drifting (a slow transient).
        with np.errstate(invalid="ignore", divide="ignore"):
            x = self.cnt_all[:K - 1] / dt
            r = np.where(self.cnt_all[:K - 1] > 0,
                         self.lat_all[:K - 1] / np.maximum(self.cnt_all[:K - 1], 1), np.nan)
        d_cfg = int(np.searchsorted(self.marks, self.warmup))
        d_mser = max(mser(x), mser(r), *self.op_mser(dt))
        plan = model.extra.get("failures")
        if plan is not None and plan.starts.size > 1:
            # A failure window is what the run is about, not a transient: MSER would read
            # its dip as warm-up, so the window opens no later than the first failure.
            d_mser = min(d_mser, int(np.searchsorted(edges, plan.starts[1], side="right")) - 1)
        first = min(max(d_cfg, d_mser), K - 2)
        if d_mser > d_cfg:
            warm_rule = (f"the first {int(self.marks[first]):,} requests (MSER: throughput or "
                         f"latency still drifting after workload.warmup's {self.warmup:,})")
        else:
            warm_rule = f"the first {int(self.marks[first]):,} requests (workload.warmup)"
        t0, t1 = float(edges[first]), float(edges[-1])
        cnt, lat, size = self.cnt.copy(), self.lat.copy(), self.size.copy()
        hist = self.hist
        if t1 > t0:
            win = np.arange(first, K - 1)
            # Batches: consecutive intervals grouped into at most BATCHES.
            groups = np.array_split(np.arange(win.size), min(BATCHES, win.size))
            bedges = np.array([edges[first + g[0]] for g in groups] + [edges[-1]])
            batch_of = np.concatenate([np.full(g.size, k) for k, g in enumerate(groups)])
        else:
            # A degenerate run (all arrivals at once): every finish after t0 but the last.
            t1 = self.fmax
            win = np.arange(first, K)
            bedges = np.array([t0, t1])
            batch_of = np.zeros(win.size, dtype=np.int64)
            hist = hist.copy()
            for a in self.at_max:
                okm = a[1] > 0
                o = a[0][okm].astype(np.int64)
                np.subtract.at(cnt[K - 1], o, 1)
                np.subtract.at(lat[K - 1], o, a[2][okm])
                np.subtract.at(size[K - 1], o, a[3][okm])
                np.subtract.at(hist[K - 1], (o, lat_bin(a[2][okm])), 1)
        self.win = win
        span = t1 - t0
        nb = bedges.size - 1
        blen = np.diff(bedges)
        rows = []
        h_op = hist[win].sum(axis=0, dtype=np.int64)    # [op, bin] over the window
        for code, name in [(None, "ALL"), *enumerate(OPS)]:
            cols = slice(None) if code is None else [code]
            c_i = cnt[win][:, cols].sum(axis=1)      # per window interval
            k = int(c_i.sum())
            if k == 0:
                continue
            l_i = lat[win][:, cols].sum(axis=1) * 1e3
            h = h_op.sum(axis=0) if code is None else h_op[code]
            row = {"op": name, "count": k, "ops_s": k / span,
                   "mb_s": float(size[win][:, cols].sum()) / span / 1e6 if code != DELETE
                   else 0.0,
                   "lat_mean_ms": float(l_i.sum()) / k,
                   "lat_p50_ms": hist_percentile(h, 50) * 1e3,
                   "lat_p95_ms": hist_percentile(h, 95) * 1e3,
                   "lat_p99_ms": hist_percentile(h, 99) * 1e3}
            if nb >= 2:
                cb = np.bincount(batch_of, weights=c_i, minlength=nb)
                lb = np.bincount(batch_of, weights=l_i, minlength=nb)
                row["ops_s_ci95"] = batch_ci(cb, blen)
                row["lat_mean_ci95_ms"] = batch_ci(lb, cb)
            rows.append(row)
        if code_all := [r for r in rows if r["op"] == "ALL"]:
            code_all[0]["mb_s"] = sum(r["mb_s"] for r in rows if r["op"] != "ALL")
        servers = np.asarray(res.servers, dtype=float)
        u = (res.snap_busy[-2] - res.snap_busy[first]) / (servers * span)
        n_win = int(cnt[win].sum())
        L = float(area[win].sum()) / span
        X = n_win / span
        R = float(lat[win].sum()) / n_win if n_win else 0.0
        window = {"from_s": t0, "to_s": t1, "seconds": span, "requests": n_win,
                  "warmup_requests": int(self.marks[first]), "warmup_rule": warm_rule,
                  "drain_s": float(res.sim_time) - t1, "batches": int(nb),
                  "rule": "requests finishing between the warm-up's last arrival and the "
                          + ("last arrival before a client leaves (after it the population "
                             "drains)" if closed else "run's last arrival")}
        ts = self._timeseries(model, res, t0, t1)
        return _report(model, res, closed, pd.DataFrame(rows), u, L, X, R, window, ts,
                       build_wall, notes, self.n)

    def op_mser(self, dt: np.ndarray) -> list[int]:
        """MSER of every operation's own throughput and latency series: an operation can
        still drift when the totals do not (after a failure PUT latency read 55.6 ms at
        60k requests and 42.8 ms at 300k when only the totals were checked). Operations
        with fewer than OP_MSER_MIN finishes per interval are left to the totals: their
        series are noise."""
        out: list[int] = []
        c = self.cnt[:self.K - 1]
        for o in range(c.shape[1]):
            if c[:, o].mean() < OP_MSER_MIN:
                continue
            with np.errstate(invalid="ignore", divide="ignore"):
                out += [mser(c[:, o] / dt),
                        mser(np.where(c[:, o] > 0, self.lat[:self.K - 1, o] / np.maximum(
                            c[:, o], 1), np.nan))]
        return out

    def _timeseries(self, model: ClusterModel, res: Any, t0: float, t1: float) -> Any:
        """Per interval between snapshots (then the drain, to the last event): throughput
        and mean latency of the requests finishing in it (also per operation), and each
        resource class's busiest station's utilisation."""
        import pandas as pd

        edges, busy = res.snap_t, res.snap_busy
        keep = np.flatnonzero(np.diff(edges) > 0)
        cnt, ls = self.cnt_all, self.lat_all
        dt = np.diff(edges)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = {"t_from": edges[:-1], "t_to": edges[1:],
                   "phase": np.where(edges[1:] <= t0 + 1e-12, "warmup",
                                     np.where(edges[:-1] >= t1 - 1e-12, "drain", "steady")),
                   "ops_s": cnt / dt,
                   "lat_mean_ms": np.where(cnt > 0, ls / np.maximum(cnt, 1), np.nan) * 1e3}
            # Each operation's own mean latency (successful requests): an operation can
            # swing while the total holds.
            for o, name in enumerate(OPS):
                if self.cnt[:, o].any():
                    c_o = self.cnt[:, o]
                    out[f"{name.lower()}_lat_mean_ms"] = np.where(
                        c_o > 0, self.lat[:, o] / np.maximum(c_o, 1), np.nan) * 1e3
            servers = np.asarray(res.servers, dtype=float)
            ub = np.diff(busy, axis=0) / (servers[None, :] * dt[:, None])
            for cls in model.classes():
                out[f"util_{cls}"] = ub[:, model.station_class == cls].max(axis=1)
        return pd.DataFrame(out).iloc[keep].reset_index(drop=True)

    def _finish_kept(self, model: ClusterModel, res: Any, closed: bool, build_wall: float,
                     notes: list[str] | None) -> SimReport:
        """No snapshots: the requests after the warm-up, to the last finish, exactly."""
        import pandas as pd

        rec = np.concatenate(self.kept, axis=1) if self.kept else np.zeros((6, 0))
        idx, s, f, opf, size, okf = rec
        op = opf.astype(np.int64)
        lat = f - s
        after = idx >= self.warmup
        t0 = float(res.stats_start)
        t1 = float(f[after].max())
        if t1 <= t0:
            t1 = float(f.max())
        m = after & (okf > 0)
        span = t1 - t0
        rows = []
        for code, name in [(None, "ALL"), *enumerate(OPS)]:
            sel = m if code is None else m & (op == code)
            k = int(sel.sum())
            if k == 0:
                continue
            la = lat[sel] * 1e3
            rows.append({"op": name, "count": k, "ops_s": k / span,
                         "mb_s": float(size[sel].sum()) / span / 1e6 if code != DELETE else 0.0,
                         "lat_mean_ms": float(la.mean()),
                         "lat_p50_ms": float(np.percentile(la, 50)),
                         "lat_p95_ms": float(np.percentile(la, 95)),
                         "lat_p99_ms": float(np.percentile(la, 99))})
        if code_all := [r for r in rows if r["op"] == "ALL"]:
            code_all[0]["mb_s"] = sum(r["mb_s"] for r in rows if r["op"] != "ALL")
        overlap = np.clip(np.minimum(f, t1) - np.maximum(s, t0), 0.0, None)
        L = float(overlap.sum()) / span
        X = float(m.sum()) / span
        R = float(lat[m].mean()) if m.any() else 0.0
        window = {"from_s": t0, "to_s": t1, "seconds": span, "requests": int(m.sum()),
                  "warmup_requests": self.warmup,
                  "warmup_rule": f"the first {self.warmup:,} requests (workload.warmup)",
                  "drain_s": float(res.sim_time) - t1, "batches": 1,
                  "rule": "requests after the warm-up, to the last finish (no engine snapshots)"}
        return _report(model, res, closed, pd.DataFrame(rows), res.utilisation(), L, X, R,
                       window, None, build_wall, notes, self.n)


def _report(model: ClusterModel, res: Any, closed: bool, ops: Any, u: np.ndarray, L: float,
            X: float, R: float, window: dict[str, Any], ts: Any, build_wall: float,
            notes: list[str] | None, n: int) -> SimReport:
    """The SimReport around a window's figures: utilisation table, bottleneck, notes and
    the Little's-law checks."""
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
    # The system's Little's law over the window: L (time-average requests in the system)
    # against X x R of the counted requests.
    ll_sys = abs(L - X * R) / L if L > 0 else float("nan")
    if ll_sys > 0.02:
        notes.append(f"Little's law over the window is off by {ll_sys:.1%}: latency drifts "
                     "slowly against the window's length; simulate more requests")
    return SimReport(name=model.spec.name, loop="closed" if closed else "open",
                     requests=n, ops=ops, util=util, bottleneck=bottleneck,
                     littles_law_error=ll, station_littles_error=st_err, events=res.events,
                     sim_time=res.sim_time, wall=res.wall, build_wall=build_wall,
                     notes=notes, window=window, littles_law_system=ll_sys, timeseries=ts)


def summarise(model: ClusterModel, req: Requests, res: Any, build_wall: float = 0.0,
              notes: list[str] | None = None) -> SimReport:
    """Statistics over the steady-state window: from the warm-up's last arrival to the run's
    last arrival (after it, the population drains: in closed loop fewer clients remain).
    Throughput counts the requests that finish inside the window; latencies are theirs
    (percentiles within LAT_REL_ERR); utilisations come from the engine's snapshots at the
    window's edges. Without snapshots (`marks` not given to the engine) the window runs
    from the warm-up to the last finish. A whole run's result, summed as `Tally` sums a
    streamed one."""
    n = len(req)
    snap_t = np.asarray(getattr(res, "snap_t", np.zeros(0)))[:-1]
    closed = req.arrivals is None
    marks = window_marks(n, min(int(model.spec.workload.clients or 1), n) if closed else None)
    if snap_t.size >= 2 and marks.size != snap_t.size:    # snapshots asked elsewhere
        marks = np.linspace(0, n - 1, snap_t.size)
    tally = Tally(n, res.warmup, marks if snap_t.size >= 2 else np.zeros(0, dtype=np.int64))
    ok = req.ok if req.ok is not None else np.ones(n, dtype=bool)
    tally.add(np.arange(n), res.start, res.finish, req.op, req.size, ok, math.inf, snap_t,
              final=True)
    return tally.finish(model, res, closed, build_wall, notes)
