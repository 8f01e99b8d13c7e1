"""The minimal measurement set for the f_rw model and its execution through a runner.

Per I/O size: 100 % read and 100 % write, repeated; optionally validation mixes (other read
percentages) and a mixed-size workload (fio `bssplit`). Replicate rounds run in a shuffled
order so that the endpoints are interleaved with the mixes: on a drifting device (see
notes/real-systems.md, 1.3) a block of endpoints measured first would bias every check.
The model is fitted from the endpoints only; everything else is held out and compared.
"""

from __future__ import annotations

import errno
import math
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from ..campaign.runners.base import RunResult, Runner
from .model import (
    Cell, EstimateError, RWModel, check_read_pct, parse_mix, size_bytes, size_label,
)

PATTERNS = {"random": ("randread", "randwrite", "randrw"),
            "sequential": ("read", "write", "rw")}
METRICS = ("read_iops", "write_iops", "total_iops",
           "read_bw_bytes", "write_bw_bytes", "total_bw_bytes")


@dataclass(frozen=True)
class PlannedRun:
    """One fio run of the plan. `size` is a size label, or a mix spec for kind 'mixed'."""

    kind: str  # "anchor" | "validate" | "mixed"
    size: str
    read_pct: float
    replicate: int
    config: dict[str, Any]


def _pcts(spec: str | Iterable[float] | None) -> list[float]:
    if spec is None:
        return []
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out = []
    for x in items:
        if isinstance(x, str) and not x.strip():
            continue
        p = check_read_pct(x.strip() if isinstance(x, str) else x)
        if p not in out:
            out.append(p)
    return out


def mix_spec(props: Mapping[int, float]) -> str:
    """{4096: 0.8, 65536: 0.2} -> '4k:0.8,64k:0.2'."""
    return ",".join(f"{size_label(s)}:{p:g}" for s, p in props.items())


def bssplit(props: Mapping[int, float]) -> str:
    """fio's bssplit for I/O-count proportions: '4k/80:64k/20'. fio wants whole percents."""
    parts = []
    for s, p in props.items():
        pct = 100.0 * p
        if abs(pct - round(pct)) > 1e-6:
            raise EstimateError(f"fio bssplit needs whole percentages; {size_label(s)}:{p:g} "
                                f"is {pct:g}%")
        parts.append(f"{size_label(s)}/{int(round(pct))}")
    return ":".join(parts)


@dataclass
class MeasurePlan:
    """What to run. fio options common to every run go in `options`."""

    sizes: list[int]
    repeat: int = 3
    validate: list[float] = field(default_factory=list)
    mixed: dict[int, float] | None = None
    mixed_pcts: list[float] = field(default_factory=list)
    pattern: str = "random"
    runtime: float = 3.0
    file_size: str = "256m"
    options: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None

    @classmethod
    def build(cls, sizes: str | Iterable[Any], repeat: int = 3,
              validate: str | Iterable[float] | None = None,
              mixed: str | Mapping[Any, float] | None = None,
              mixed_pcts: str | Iterable[float] | None = None,
              runtime: float = 3.0, file_size: str = "256m", iodepth: int = 16,
              ioengine: str = "libaio", pattern: str = "random", seed: int | None = None,
              **extra: Any) -> MeasurePlan:
        """Check and normalise the user's choices; extra fio options pass through."""
        items = sizes.split(",") if isinstance(sizes, str) else list(sizes)
        bs = []
        for s in items:
            if isinstance(s, str) and not s.strip():
                continue
            b = size_bytes(s.strip() if isinstance(s, str) else s)
            if b not in bs:
                bs.append(b)
        if not bs:
            raise EstimateError("--sizes is empty; give I/O sizes such as 4k,64k")
        if repeat < 1:
            raise EstimateError(f"--repeat {repeat} must be >= 1")
        if not (math.isfinite(runtime) and runtime >= 1):
            raise EstimateError(f"--runtime {runtime} must be at least 1 second")
        if pattern not in PATTERNS:
            raise EstimateError(f"--pattern {pattern!r} is not one of {', '.join(PATTERNS)}")
        if iodepth < 1:
            raise EstimateError(f"--iodepth {iodepth} must be >= 1")
        size_bytes(file_size)
        val = [p for p in _pcts(validate) if p not in (0.0, 100.0)]
        mix = parse_mix(mixed) if mixed else None
        if mix is not None:
            missing = [size_label(s) for s in mix if s not in bs]
            if missing:
                raise EstimateError(f"mixed-size workload uses {', '.join(missing)}, which "
                                    f"--sizes does not measure")
            bssplit(mix)  # fail now, not after minutes of runs
        mpcts = _pcts(mixed_pcts) if mixed_pcts is not None else (val or [70.0])
        opts = {"ioengine": ioengine, "iodepth": int(iodepth), **extra}
        return cls(bs, int(repeat), val, mix, mpcts if mix else [], pattern, float(runtime),
                   str(file_size), opts, seed)

    def _config(self, read_pct: float, bs: str | None = None, split: str | None = None
                ) -> dict[str, Any]:
        rd, wr, rw = PATTERNS[self.pattern]
        if read_pct == 100.0:
            cfg: dict[str, Any] = {"rw": rd}
        elif read_pct == 0.0:
            cfg = {"rw": wr}
        else:
            cfg = {"rw": rw, "rwmixread": int(read_pct) if read_pct == int(read_pct)
                   else read_pct}
        if split is not None:
            cfg["bssplit"] = split
        else:
            cfg["bs"] = bs
        return cfg

    def runs(self) -> list[PlannedRun]:
        """Every run, in execution order: replicate rounds, each round shuffled."""
        rng = random.Random(self.seed)
        out: list[PlannedRun] = []
        for rep in range(1, self.repeat + 1):
            rnd: list[PlannedRun] = []
            for b in self.sizes:
                lab = size_label(b)
                for p in (100.0, 0.0):
                    rnd.append(PlannedRun("anchor", lab, p, rep, self._config(p, bs=lab)))
                for p in self.validate:
                    rnd.append(PlannedRun("validate", lab, p, rep, self._config(p, bs=lab)))
            if self.mixed:
                split = bssplit(self.mixed)
                for p in self.mixed_pcts:
                    rnd.append(PlannedRun("mixed", mix_spec(self.mixed), p, rep,
                                          self._config(p, split=split)))
            rng.shuffle(rnd)
            out.extend(rnd)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"sizes": [size_label(b) for b in self.sizes], "repeat": self.repeat,
                "validate": self.validate,
                "mixed": mix_spec(self.mixed) if self.mixed else None,
                "mixed_pcts": self.mixed_pcts, "pattern": self.pattern,
                "runtime": self.runtime, "file_size": self.file_size,
                "options": self.options, "seed": self.seed}


def probe_direct(directory: Path) -> tuple[bool, str]:
    """Whether files in `directory` accept O_DIRECT (some filesystems reject it)."""
    flag = getattr(os, "O_DIRECT", None)
    if flag is None:
        return False, "this platform has no O_DIRECT"
    path = directory / ".storlab-odirect-probe"
    try:
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | flag, 0o600)
        os.close(fd)
        return True, ""
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
            return False, f"{directory} rejects O_DIRECT ({exc.strerror})"
        raise EstimateError(f"{directory}: cannot create the scratch file ({exc.strerror})"
                            ) from None
    finally:
        path.unlink(missing_ok=True)


def _mean_ci(values: np.ndarray, confidence: float) -> tuple[float, float, float]:
    m = float(values.mean())
    if values.size < 2:
        return m, math.nan, math.nan
    half = stats.t.ppf(0.5 + confidence / 2, values.size - 1) * values.std(ddof=1) \
        / math.sqrt(values.size)
    return m, m - half, m + half


@dataclass
class MeasureResult:
    """Every run, the model fitted from the endpoints, and predicted against measured."""

    plan: MeasurePlan
    runs: pd.DataFrame
    model: RWModel
    checks: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        failed = self.runs[self.runs["status"] != "ok"]
        out = list(self.model.warnings)
        if len(failed):
            out.append(f"{len(failed)} of {len(self.runs)} runs failed and were left out "
                       f"(first error: {failed['error'].iloc[0]})")
        return out

    def table(self) -> pd.DataFrame:
        """Predicted against measured total IOPS for every measured point."""
        return self.checks.copy()

    def to_dict(self) -> dict[str, Any]:
        return {"plan": self.plan.to_dict(), "notes": self.notes, "warnings": self.warnings,
                "model": self.model.to_dict(), "fits": self.model.table(),
                "checks": self.checks, "runs": self.runs}

    def plot(self):
        """The model's plot plus the measured mixed-size points and both mix rules' lines."""
        fig = self.model.plot()
        ax = fig.axes[0]
        mixed = self.checks[self.checks["kind"] == "mixed"]
        if self.plan.mixed and len(mixed):
            xs = np.linspace(0, 100, 51)
            for rule, style in (("slides", "--"), ("harmonic", ":")):
                ys = [self.model.predict(x, self.plan.mixed, mix=rule).value() for x in xs]
                ax.plot(xs, ys, style, color="gray",
                        label=f"{mix_spec(self.plan.mixed)} ({rule})")
            first = mixed.drop_duplicates("read_pct")
            ax.plot(first["read_pct"], first["measured_iops"], "s", color="black",
                    label=f"{mix_spec(self.plan.mixed)} measured")
            ax.legend(fontsize="small")
        return fig


def _row(run: PlannedRun, order: int, res: RunResult) -> dict[str, Any]:
    row: dict[str, Any] = {"order": order, "kind": run.kind, "size": run.size,
                           "read_pct": run.read_pct, "replicate": run.replicate,
                           "status": res.status, "seconds": res.ended - res.started}
    for m in METRICS:
        row[m] = float(res.metrics[m]) if m in res.metrics else math.nan
    if res.ok and not all(math.isfinite(row[m]) for m in ("read_iops", "write_iops")):
        row["status"] = "failed"
        row["error"] = "runner reported no read_iops/write_iops"
    else:
        tail = (res.stderr or "").strip().splitlines()
        row["error"] = "" if res.ok else (tail[-1] if tail else f"exit {res.exit_code}")
    row["config"] = " ".join(f"{k}={v}" for k, v in run.config.items())
    return row


def _cells(ok: pd.DataFrame) -> dict[int, list[Cell]]:
    cells: dict[int, list[Cell]] = {}
    single = ok[ok["kind"] != "mixed"]
    for (size, pct), g in single.groupby(["size", "read_pct"], sort=True):
        cells.setdefault(size_bytes(size), []).append(
            Cell.from_samples(float(pct), g["read_iops"].to_numpy(), g["write_iops"].to_numpy()))
    return cells


def _checks(model: RWModel, ok: pd.DataFrame, plan: MeasurePlan, confidence: float
            ) -> pd.DataFrame:
    rows = []
    for (kind, size, pct), g in ok.groupby(["kind", "size", "read_pct"], sort=False):
        meas, mlo, mhi = _mean_ci(g["total_iops"].to_numpy(dtype=float), confidence)
        rules = ["slides", "harmonic"] if kind == "mixed" else ["-"]
        for rule in rules:
            if kind == "mixed":
                pr = model.predict(pct, plan.mixed, mix=rule, confidence=confidence)
            else:
                pr = model.predict_size(size, pct, confidence)
            pred = pr.value()
            rows.append({
                "kind": kind, "size": size, "read_pct": pct, "rule": rule, "n": len(g),
                "measured_iops": meas, "measured_lo": mlo, "measured_hi": mhi,
                "predicted_iops": pred, "pred_lo": pr.value("total_iops_lo"),
                "pred_hi": pr.value("total_iops_hi"),
                "error_pct": 100.0 * (pred - meas) / meas if meas > 0 else math.nan,
            })
    order = {"anchor": 0, "validate": 1, "mixed": 2}
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["_k"] = df["kind"].map(order)
    df["_s"] = [size_bytes(s) if k != "mixed" else 0 for k, s in zip(df["kind"], df["size"])]
    return (df.sort_values(["_k", "_s", "read_pct", "rule"])
              .drop(columns=["_k", "_s"]).reset_index(drop=True))


def run_plan(plan: MeasurePlan, directory: Path | None = None, runner: Runner | None = None,
             confidence: float = 0.95, progress: Callable[[str], None] | None = None,
             keep: bool = False) -> MeasureResult:
    """Run the plan (fio through the campaign's FioRunner unless a runner is given), fit
    the model from the 0 % and 100 % read runs, and compare it with every other run."""
    notes: list[str] = []
    if directory is not None and not Path(directory).is_dir():
        raise EstimateError(f"--dir {directory}: not a directory")
    scratch = Path(tempfile.mkdtemp(prefix="storlab-estimate-", dir=directory))
    try:
        options = dict(plan.options)
        if runner is None:
            from ..campaign.runners.fio import FioRunner  # the campaign's runner, not ours

            direct, why = probe_direct(scratch)
            if "direct" not in options:
                options["direct"] = 1 if direct else 0
                if not direct:
                    notes.append(f"{why}: running buffered (direct=0); the page cache "
                                 "will flatter reads and absorb writes")
            # fio's runtime takes whole seconds or a unit suffix
            rt = (int(plan.runtime) if float(plan.runtime).is_integer()
                  else f"{round(plan.runtime * 1000)}ms")
            fixed = {"filename": str(scratch / "scratch.dat"), "size": plan.file_size,
                     "runtime": rt, "time_based": 1, **options}
            runner = FioRunner(**fixed)
            notes.append("fio " + " ".join(f"{k}={v}" for k, v in fixed.items()
                                            if k != "filename") + f", file in {scratch}")
        planned = plan.runs()
        rows = []
        timeout = plan.runtime * 4 + 120  # the first run also lays out the file
        for i, run in enumerate(planned, 1):
            workdir = scratch / f"run{i:03d}"
            workdir.mkdir()
            t0 = time.time()
            res = runner.run(run.config, workdir, timeout=timeout)
            if not res.started:
                res.started, res.ended = t0, time.time()
            rows.append(_row(run, i, res))
            if progress is not None:
                r = rows[-1]
                status = (f"{r['total_iops']:,.0f} IOPS" if r["status"] == "ok"
                          else f"{r['status']}: {r['error']}")
                progress(f"[{i}/{len(planned)}] {run.kind} {run.size} {run.read_pct:g}% read "
                         f"(rep {run.replicate}): {status}")
        runs = pd.DataFrame(rows)
        ok = runs[runs["status"] == "ok"]
        if ok.empty:
            first = runs["error"].iloc[0] if len(runs) else "no runs"
            raise EstimateError(f"every run failed (first error: {first})")
        model = RWModel.from_cells(_cells(ok), method="anchors",
                                   meta={"measured": plan.to_dict(), "notes": notes})
        return MeasureResult(plan, runs, model, _checks(model, ok, plan, confidence), notes)
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)
