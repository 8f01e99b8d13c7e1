"""Calibration: fit per-operation CPU costs and disk parameters to measured throughputs.

The CoFluent approach (storage-tools notes, section 4.1): calibrate each component once,
then reuse it across designs. Input is a CSV, one measured point per row:

    config,clients,object_size,op,ops_s[,split]
    base,16,16KiB,GET,5210
    nodes=8;disk=ssd_s3700,64,1MiB,PUT,1930

`config` is a label or `key=value;key=value` overrides of the cluster file (the same names
as `--set`); other columns named like overrides (`nodes`, `disk`, ...) apply too; `op` is one
operation or a mix `GET:0.8,PUT:0.2`; `split` = train/test holds points out (otherwise
`holdout` picks a seeded random share). Aliases: concurrency, operation, size, measured.

Six log-multipliers are fitted (proxy and object-server CPU: per operation and per MB; disk
per-I/O overhead and bandwidth) by `scipy.optimize.least_squares` on log(predicted /
measured), with the analytic model as the predictor: every station demand is linear in
those six, so each row's demands are decomposed once and the fit needs no re-simulation.
A small ridge pulls multipliers toward 1 when the data cannot tell them apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from ..errors import SimError
from ..jsonutil import to_jsonable
from ..result_shape import Result
from .analytic import Demands, solve_mva, demands
from .model import ClusterModel, build_model
from .ops import OPS
from .spec import SHORT_KEYS, CpuCosts, OpCost, apply_overrides, parse_cluster

PARAMS = ("proxy_cpu_op", "proxy_cpu_mb", "object_cpu_op", "object_cpu_mb", "disk_overhead",
          "disk_bandwidth")
_ALIASES = {"concurrency": "clients", "operation": "op", "size": "object_size",
            "measured": "ops_s", "measured_ops_s": "ops_s", "throughput": "ops_s",
            "configuration": "config"}
RIDGE = 0.05
#: Latency columns a measurement may carry for `client_delay_ms`, best first: the mean is
#: what Little's law needs; the median stands in for it when that is all that was recorded.
LATENCY_COLUMNS = ("lat_mean_ms", "p50_ms", "lat_p50_ms")


def read_measurements(path: str | Path, text: str | None = None) -> pd.DataFrame:
    """The measurements CSV at `path`; `text`: its content already read (`path` then only
    names it), else read once, bounded, from one descriptor (`fileio.read_text`)."""
    import io

    from ..fileio import read_text

    p = Path(path)
    if text is None:
        text = read_text(p)
    try:
        df = pd.read_csv(io.StringIO(text), comment="#")
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise SimError(f"{p}: cannot read CSV ({exc})") from None
    df = df.rename(columns={c: _ALIASES.get(c.strip().lower(), c.strip().lower())
                            for c in df.columns})
    for col in ("clients", "object_size", "op", "ops_s"):
        if col not in df:
            raise SimError(f"{p}: missing column {col!r} (need clients, object_size, op, ops_s)")
    bad = df[~(pd.to_numeric(df["ops_s"], errors="coerce") > 0)]
    if len(bad):
        raise SimError(f"{p}: row {bad.index[0] + 2}: ops_s {bad['ops_s'].iloc[0]!r} is not > 0")
    df["ops_s"] = df["ops_s"].astype(float)
    return df


def client_delay_ms(measurements: pd.DataFrame) -> tuple[float, str]:
    """The per-request time a closed-loop load generator spends outside the latency it
    measures (choosing a key, building a payload, recording, waiting for its GIL and a core
    before the next send), by Little's law over the clients: N / X = R + Z, so Z = N / X - R.

    Each row gives one estimate (`clients`, `ops_s` and a latency column, the first of
    LATENCY_COLUMNS present); the estimates of one point (same config, clients, size, op)
    are reduced by their median (one stalled run must not set it), the points by their mean.
    Returns (Z in ms, floored at 0; the latency column used). With the median latency in
    place of the mean, Z is an upper bound whenever latencies are skewed right (mean > p50).
    This is a think time in the simulated closed loop: it lowers throughput only where the
    clients, not the servers, are short (few clients)."""
    # The first column with a number in it: a CSV may carry an empty lat_mean_ms beside
    # a filled p50 (runs measured before the mean was recorded).
    col = next((c for c in LATENCY_COLUMNS if c in measurements
                and pd.to_numeric(measurements[c], errors="coerce").notna().any()), None)
    if col is None:
        raise SimError("no latency values: need one of the columns "
                       f"{', '.join(LATENCY_COLUMNS)} with numbers in it")
    df = measurements.copy()
    df["gap"] = (df["clients"].astype(float) * 1000.0 / df["ops_s"].astype(float)
                 - pd.to_numeric(df[col], errors="coerce"))
    key = [k for k in ("config", "clients", "object_size", "op") if k in df]
    per_point = df.groupby(key, sort=False)["gap"].median()
    if per_point.isna().all():
        raise SimError(f"no finite {col} to estimate the client delay from")
    return max(0.0, float(per_point.mean())), col


def _row_overrides(row: Mapping[str, Any], source: str) -> dict[str, Any]:
    ov: dict[str, Any] = {}
    cfg = row.get("config")
    if isinstance(cfg, str) and "=" in cfg:
        for part in cfg.split(";"):
            k, sep, v = part.partition("=")
            if not sep:
                raise SimError(f"{source}: config {cfg!r}: {part!r} is not key=value")
            ov[k.strip()] = v.strip()
    for k, v in row.items():
        if k in SHORT_KEYS and k not in ("mix",) and not (isinstance(v, float) and np.isnan(v)):
            ov[k] = v
    op = str(row["op"]).strip()
    ov["mix"] = op if ":" in op else f"{op.upper()}:1"
    ov["clients"] = int(row["clients"])
    ov["object_size"] = row["object_size"]
    ov["rate"] = None
    return ov


def _isolate(model: ClusterModel, keep: str) -> ClusterModel:
    """A copy of the model where only one demand component is left (the rest are zero)."""
    zero = {o: OpCost(base_ms=0.0, ms_per_mb=0.0) for o in OPS}
    costs = model.spec.cpu_cost
    pick = {"proxy_cpu_op": ("proxy", "base"), "proxy_cpu_mb": ("proxy", "mb"),
            "object_cpu_op": ("object", "base"), "object_cpu_mb": ("object", "mb")}
    proxy, obj = dict(zero), dict(zero)
    if keep in pick:
        side, part = pick[keep]
        src = costs.proxy if side == "proxy" else costs.object
        kept = {o: OpCost(base_ms=c.base_ms if part == "base" else 0.0,
                          ms_per_mb=c.ms_per_mb if part == "mb" else 0.0) for o, c in src.items()}
        proxy, obj = (kept, obj) if side == "proxy" else (proxy, kept)
    spec = model.spec.model_copy(update={"cpu_cost": CpuCosts.model_construct(
        ref_ghz=costs.ref_ghz, proxy=proxy, object=obj)})
    inf = np.inf
    if keep == "disk_overhead":      # per-I/O overhead only
        models = [dataclasses.replace(m, read_bw=inf, write_bw=inf) for m in model.models]
    elif keep == "disk_bandwidth":   # transfer time only
        models = [m.scaled(overhead=0.0) for m in model.models]
    else:
        models = [dataclasses.replace(m.scaled(overhead=0.0), read_bw=inf, write_bw=inf)
                  for m in model.models]
    net = keep == "network"
    return dataclasses.replace(
        model, spec=spec, models=models,
        node_nic_bps=model.node_nic_bps if net else np.full_like(model.node_nic_bps, inf),
        rack_bps=model.rack_bps if net else np.full_like(model.rack_bps, inf))


@dataclasses.dataclass
class _Row:
    model: ClusterModel
    parts: list[Demands]  # one per PARAMS entry, then the fixed network part
    measured: float


def _decompose(model: ClusterModel, n: int) -> list[Demands]:
    parts = [demands(_isolate(model, k), n=n) for k in (*PARAMS, "network")]
    # The FCFS residual correction needs each station's demand variability, and the quorum
    # wait the share of a disk's work its replica set shares; neither adds up over parts:
    # take them from the whole nominal model (_combine keeps parts[0]'s).
    whole = demands(model, n=n)
    parts[0] = dataclasses.replace(parts[0], scv=whole.scv, together=whole.together)
    return parts


def _combine(parts: list[Demands], theta: np.ndarray) -> Demands:
    w = np.append(np.exp(theta), 1.0)
    w[PARAMS.index("disk_bandwidth")] = np.exp(-theta[PARAMS.index("disk_bandwidth")])
    base = parts[0]
    cover = (None if base.cover is None else
             sum(wi * p.cover for wi, p in zip(w, parts)))  # demand under worker pools
    return dataclasses.replace(base, pre=sum(wi * p.pre for wi, p in zip(w, parts)),
                               fork=sum(wi * p.fork for wi, p in zip(w, parts)), cover=cover)


def _predict(row: _Row, theta: np.ndarray) -> float:
    return float(solve_mva(row.model, dem=_combine(row.parts, theta)).throughput)


@dataclasses.dataclass
class CalibrationResult(Result):
    """Fitted multipliers, the calibrated cluster, and the error of every point."""

    PLOT_KINDS = ("predicted",)
    ERROR = SimError

    params: dict[str, float]
    points: pd.DataFrame   # one row per measurement: measured, predicted, error_pct, split
    raw: dict[str, Any]    # the calibrated cluster as a YAML-ready dict
    cost: float

    def to_frame(self) -> pd.DataFrame:
        return self.points

    def params_table(self) -> pd.DataFrame:
        return pd.DataFrame({"parameter": list(self.params), "multiplier": list(
            self.params.values())})

    def summary(self) -> dict[str, float]:
        out = {}
        for split, g in self.points.groupby("split"):
            out[f"{split}_mape_pct"] = float(g["error_pct"].abs().mean())
            out[f"{split}_max_abs_pct"] = float(g["error_pct"].abs().max())
        return out

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({"params": self.params, "summary": self.summary(),
                            "points": self.points, "cluster": self.raw})

    def plot(self, kind: str | None = None):  # noqa: ANN201 - matplotlib Figure
        """`predicted` (the only kind): predicted against measured throughput of every point
        (log-log), training and held-out points apart, the diagonal and a ±10 % band."""
        self.plot_kind(kind)
        from ..plotstyle import MARKERS, PALETTE, format_axis, styled, subplots

        with styled():
            fig, ax = subplots(figsize=(5.6, 5.2))
            lim = [self.points[["measured", "predicted"]].min().min() * 0.8,
                   self.points[["measured", "predicted"]].max().max() * 1.25]
            ax.fill_between(lim, [v / 1.1 for v in lim], [v * 1.1 for v in lim],
                            color="#E3E3E3", alpha=0.7, lw=0, label="within ±10 %")
            ax.plot(lim, lim, color="#777777", lw=1, label="predicted = measured")
            names = {"train": "training points", "test": "held-out points"}
            for i, (split, g) in enumerate(self.points.groupby("split")):
                mape = float(g["error_pct"].abs().mean())
                ax.scatter(g["measured"], g["predicted"], color=PALETTE[i],
                           marker=MARKERS[i], s=28, zorder=3,
                           label=f"{names.get(str(split), split)} (mean |error| {mape:.1f} %)")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(lim)
            ax.set_ylim(lim)
            ax.set_aspect("equal")
            format_axis(ax.xaxis, "ops_s")
            format_axis(ax.yaxis, "ops_s")
            ax.set_xlabel("measured throughput (ops/s)")
            ax.set_ylabel("simulated throughput (ops/s)")
            ax.set_title("Calibrated simulator against measurements", fontsize=9.5)
            ax.legend(loc="upper left")
        return fig


def _simulated(raw: Mapping[str, Any], rec: Mapping[str, Any], theta: np.ndarray,
               requests: int, where: str) -> float:
    """Throughput the simulator gives at one measured point with multipliers exp(theta)."""
    from .run import run_model

    cal = calibrated_raw(raw, {k: float(np.exp(t)) for k, t in zip(PARAMS, theta)})
    spec = parse_cluster(apply_overrides(cal, _row_overrides(rec, where), where), where)
    rep = run_model(build_model(spec), requests=requests)
    return float(rep.ops.set_index("op").loc["ALL", "ops_s"])


def calibrate(raw: Mapping[str, Any], measurements: pd.DataFrame, *, holdout: float = 0.0,
              seed: int = 0, source: str = "cluster", n_demand: int = 4000, fit: bool = True,
              progress: Any = None, predictor: str = "analytic",
              sim_requests: int = 4000) -> CalibrationResult:
    """Fit on the train points, predict every point, report the errors. `fit=False` keeps
    the nominal model (all multipliers 1): the baseline a calibration must beat.
    `predictor="simulator"` refines the analytic fit with simulations (`sim_requests` each,
    one seed: common random numbers keep the fit smooth) and predicts every point by
    simulating it, so what the analytic model leaves out (failures, its own error) does not
    bias the fit. `progress(label, advance=..., total=...)` hears of each point modelled and
    each evaluation of the fit."""
    if predictor not in ("analytic", "simulator"):
        raise SimError(f"predictor {predictor!r}: use analytic or simulator")
    say = progress or (lambda *a, **k: None)
    df = measurements.reset_index(drop=True)
    if "split" in df:
        split = df["split"].astype(str).str.lower().where(
            df["split"].astype(str).str.lower().isin(["train", "test"]), "train")
    else:
        split = pd.Series("train", index=df.index)
        if holdout > 0:
            rng = np.random.default_rng(seed)
            k = max(1, int(round(holdout * len(df))))
            split.iloc[rng.choice(len(df), min(k, len(df) - 1), replace=False)] = "test"
    rows: list[_Row] = []
    say("modelling the measured points", advance=0, total=len(df))
    for i, rec in enumerate(df.to_dict("records")):
        where = f"{source} row {i + 2}"
        spec = parse_cluster(apply_overrides(raw, _row_overrides(rec, where), where), where)
        model = build_model(spec)
        rows.append(_Row(model, _decompose(model, n_demand), float(rec["ops_s"])))
        say(f"modelled point {i + 1}")
    train = [r for r, s in zip(rows, split) if s == "train"]
    if fit and not train:
        raise SimError(f"{source}: no training points")

    calls = [0]

    def resid(theta: np.ndarray) -> np.ndarray:
        calls[0] += 1
        say(f"fitting: {calls[0]} evaluations", advance=0)
        r = [np.log(_predict(row, theta) / row.measured) for row in train]
        return np.concatenate([r, RIDGE * theta])

    theta = np.zeros(len(PARAMS))
    cost = 0.0
    if fit:
        sol = least_squares(resid, theta, bounds=(-4.0, 4.0), x_scale=1.0, diff_step=1e-3)
        theta, cost = sol.x, float(sol.cost)
    recs = df.to_dict("records")
    if predictor == "simulator":
        train_recs = [(i, rec) for i, (rec, s_) in enumerate(zip(recs, split)) if s_ == "train"]

        def sim_resid(th: np.ndarray) -> np.ndarray:
            calls[0] += 1
            say(f"fitting by simulation: {calls[0]} evaluations", advance=0)
            r = [np.log(_simulated(raw, rec, th, sim_requests, f"{source} row {i + 2}")
                        / rows[i].measured) for i, rec in train_recs]
            return np.concatenate([r, RIDGE * th])

        if fit:
            sol = least_squares(sim_resid, theta, bounds=(-4.0, 4.0), x_scale=1.0,
                                diff_step=2e-2, max_nfev=40 * len(PARAMS))
            theta, cost = sol.x, float(sol.cost)
        pred = np.array([_simulated(raw, rec, theta, sim_requests, f"{source} row {i + 2}")
                         for i, rec in enumerate(recs)])
    else:
        pred = np.array([_predict(r, theta) for r in rows])
    meas = np.array([r.measured for r in rows])
    pts = df.copy()
    pts["split"] = split.values
    pts["measured"] = meas
    pts["predicted"] = pred
    pts["error_pct"] = (pred / meas - 1.0) * 100.0
    pts = pts.drop(columns=["ops_s"])
    params = {k: float(np.exp(t)) for k, t in zip(PARAMS, theta)}
    return CalibrationResult(params, pts, calibrated_raw(raw, params), cost)


def calibrated_raw(raw: Mapping[str, Any], params: Mapping[str, float]) -> dict[str, Any]:
    """The cluster dict with the fitted multipliers folded into cpu_cost and calibration."""
    spec = parse_cluster(raw)
    out = dict(apply_overrides(raw, {}))
    cost = spec.cpu_cost
    out["cpu_cost"] = {
        "ref_ghz": cost.ref_ghz,
        "proxy": {o: {"base_ms": round(c.base_ms * params["proxy_cpu_op"], 6),
                      "ms_per_mb": round(c.ms_per_mb * params["proxy_cpu_mb"], 6)}
                  for o, c in cost.proxy.items()},
        "object": {o: {"base_ms": round(c.base_ms * params["object_cpu_op"], 6),
                       "ms_per_mb": round(c.ms_per_mb * params["object_cpu_mb"], 6)}
                   for o, c in cost.object.items()}}
    out["calibration"] = {
        "disk_overhead": round(spec.calibration.disk_overhead * params["disk_overhead"], 6),
        "disk_bandwidth": round(spec.calibration.disk_bandwidth * params["disk_bandwidth"], 6)}
    return out
