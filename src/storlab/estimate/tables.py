"""Results tables in and out of the f_rw model: finding the read-percentage, size and
throughput columns, splitting off mixed-size rows, fitting a model from a table, and checking
measured size mixes against both mix rules."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import EstimateError, StorlabError
from .cells import Cell, check_read_pct, size_bytes, size_label
from .mixrule import MIXES
from .rwmodel import RWModel

READ_PCT_NAMES = ("read_pct", "rwmixread", "read_percent", "read_percentage", "readpct",
                  "read%", "pct_read")
SIZE_NAMES = ("size", "bs", "io_size", "iosize", "block_size", "blocksize", "bs_bytes")


def _find(df: pd.DataFrame, given: str | None, names: Sequence[str], what: str,
          required: bool = True) -> str | None:
    if given is not None:
        if given not in df.columns:
            raise EstimateError(f"{what} column {given!r} is not in the table "
                                f"(columns: {', '.join(map(str, df.columns))})")
        return given
    lower = {str(c).lower(): c for c in df.columns}
    for n in names:
        if n in lower:
            return lower[n]
    if required:
        raise EstimateError(f"no {what} column (tried {', '.join(names)}; "
                            f"columns: {', '.join(map(str, df.columns))}); name it explicitly")
    return None


def samples_from_table(df: pd.DataFrame, read_pct: str | None = None, size: str | None = None,
                       read: str | None = None, write: str | None = None,
                       total: str | None = None, source: str = "table"
                       ) -> dict[int, dict[float, tuple[list[float], list[float]]]]:
    """Per size and read percentage, the replicate read and write IOPS of a results table.

    Throughput columns, in order of preference: read and write IOPS (`read_iops`,
    `write_iops`); total IOPS split by the read percentage (`total_iops`, `iops`); read and
    write bandwidth in bytes/s (`read_bw_bytes`, `write_bw_bytes`), divided by the size;
    total bandwidth (`total_bw_bytes`, `bw_bytes`). Explicit column names override the
    search; a column name ending in `bw`/`bytes` is read as bandwidth.
    """
    pct_col = _find(df, read_pct, READ_PCT_NAMES, "read percentage")
    size_col = _find(df, size, SIZE_NAMES, "I/O size")
    if read or write:
        if not (read and write):
            raise EstimateError("give both the read and the write throughput columns")
        r_col, w_col, t_col = (_find(df, read, (), "read"), _find(df, write, (), "write"), None)
    elif total:
        r_col, w_col, t_col = None, None, _find(df, total, (), "total")
    else:
        r_col = _find(df, None, ("read_iops",), "read", False)
        w_col = _find(df, None, ("write_iops",), "write", False)
        t_col = None
        if r_col is None or w_col is None:
            r_col = w_col = None
            t_col = _find(df, None, ("total_iops", "iops"), "total", False)
        if r_col is None and t_col is None:
            r_col = _find(df, None, ("read_bw_bytes",), "read", False)
            w_col = _find(df, None, ("write_bw_bytes",), "write", False)
            if r_col is None or w_col is None:
                r_col = w_col = None
                t_col = _find(df, None, ("total_bw_bytes", "bw_bytes"), "throughput", False)
        if r_col is None and t_col is None:
            raise EstimateError(f"{source}: no throughput columns (read_iops/write_iops, "
                                "total_iops, read_bw_bytes/write_bw_bytes or total_bw_bytes)")
    used = [c for c in (r_col, w_col, t_col) if c is not None]
    is_bw = {c: any(t in str(c).lower() for t in ("bw", "bytes", "mbps", "bandwidth"))
             for c in used}
    out: dict[int, dict[float, tuple[list[float], list[float]]]] = {}
    for i, row in enumerate(df.to_dict("records")):
        where = f"{source}: row {i + 1}"
        try:
            p = check_read_pct(row[pct_col])
            b = size_bytes(row[size_col])
        except EstimateError as exc:
            raise EstimateError(f"{where}: {exc}") from None

        def num(col: str) -> float:
            v = row[col]
            try:
                x = float(v)
            except (TypeError, ValueError):
                raise EstimateError(f"{where}: {col}={v!r} is not a number") from None
            if math.isnan(x):
                return math.nan
            if not math.isfinite(x) or x < 0:
                raise EstimateError(f"{where}: {col}={v!r} must be finite and >= 0")
            return x / b if is_bw[col] else x

        if t_col is not None:
            t = num(t_col)
            if math.isnan(t):
                raise EstimateError(f"{where}: {t_col} is empty")
            r, w = t * p / 100.0, t * (100.0 - p) / 100.0
        else:
            assert r_col is not None and w_col is not None
            r, w = num(r_col), num(w_col)
            # A pure run may leave the other direction empty; that means none of it.
            if math.isnan(r) and p == 0.0:
                r = 0.0
            if math.isnan(w) and p == 100.0:
                w = 0.0
            if math.isnan(r) or math.isnan(w):
                raise EstimateError(f"{where}: read or write throughput is empty")
        rs, ws = out.setdefault(b, {}).setdefault(p, ([], []))
        rs.append(r)
        ws.append(w)
    if not out:
        raise EstimateError(f"{source}: the table has no rows")
    return out


def is_mix(value: Any) -> bool:
    """A size cell that names a size mix ('4k:0.8,64k:0.2'), as `estimate measure --runs`
    writes for its mixed-size runs."""
    return isinstance(value, str) and (":" in value or "," in value)


def split_table(df: pd.DataFrame, size: str | None = None
                ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(single-size rows, mixed-size rows, notes). Rows with a `status` other than ok
    (failed runs, or runs `estimate measure` refused) are left out, and said so."""
    notes = []
    if "status" in df.columns:
        bad = df["status"].astype(str) != "ok"
        if bad.any():
            counts = df.loc[bad, "status"].value_counts().to_dict()
            notes.append(f"{int(bad.sum())} rows left out by their status "
                         f"({', '.join(f'{k}: {v}' for k, v in counts.items())})")
        df = df[~bad]
    size_col = _find(df, size, SIZE_NAMES, "I/O size")
    mixed = df[size_col].map(is_mix).astype(bool)
    if mixed.any():
        notes.append(f"{int(mixed.sum())} mixed-size rows set aside as checks of the "
                     "size-mix rules")
    return df[~mixed], df[mixed], notes


def mixed_checks(model: RWModel, mixed: pd.DataFrame, confidence: float = 0.95,
                 read_pct: str | None = None, size: str | None = None,
                 source: str = "table") -> pd.DataFrame:
    """Measured mixed-size rows (size cell '4k:0.8,64k:0.2') against both mix rules."""
    if mixed.empty:
        return pd.DataFrame()
    pct_col = _find(mixed, read_pct, READ_PCT_NAMES, "read percentage")
    size_col = _find(mixed, size, SIZE_NAMES, "I/O size")
    t_col = next((c for c in ("total_iops", "iops") if c in mixed.columns), None)
    if t_col is None:
        if not {"read_iops", "write_iops"} <= set(mixed.columns):
            raise EstimateError(f"{source}: mixed-size rows need total_iops or read_iops and "
                                "write_iops")
        mixed = mixed.assign(total_iops=mixed["read_iops"] + mixed["write_iops"])
        t_col = "total_iops"
    rows = []
    for (spec, pct), g in mixed.groupby([size_col, pct_col], sort=False):
        p = check_read_pct(pct)
        vals = g[t_col].to_numpy(dtype=float)
        if not np.all(vals > 0):
            raise EstimateError(f"{source}: mix {spec} at {p:g}% read has a throughput <= 0")
        meas = float(vals.mean())
        for rule in MIXES:
            pr = model.predict(p, spec, mix=rule, confidence=confidence)
            pred = pr.value()
            rows.append({"mix": spec, "read_pct": p, "rule": rule, "n": len(vals),
                         "measured_iops": meas, "predicted_iops": pred,
                         "pred_lo": pr.value("total_iops_lo"),
                         "pred_hi": pr.value("total_iops_hi"), "interval": pr.interval,
                         "error_pct": 100.0 * (pred - meas) / meas})
    return pd.DataFrame(rows)


def fit_table(df: pd.DataFrame, method: str = "auto", spread_threshold: float = 0.10,
              read_pct: str | None = None, size: str | None = None, read: str | None = None,
              write: str | None = None, total: str | None = None, source: str = "table",
              meta: Mapping[str, Any] | None = None) -> RWModel:
    """Fit the model from a tidy results table (one row per run; replicates allowed).
    Mixed-size rows and rows whose status is not ok are left out (see `split_table`)."""
    df, _, notes = split_table(df, size)
    if notes:
        meta = {**(meta or {}), "table_notes": notes}
    samples = samples_from_table(df, read_pct, size, read, write, total, source)
    cells: dict[int, list[Cell]] = {}
    for b, by_pct in samples.items():
        try:
            cells[b] = [Cell.from_samples(p, rs, ws) for p, (rs, ws) in sorted(by_pct.items())]
        except EstimateError as exc:
            raise EstimateError(f"{source}: size {size_label(b)}: {exc}") from None
    return RWModel.from_cells(cells, method, spread_threshold,
                              meta={"source": source, **(meta or {})})


def read_results(path: str | Path) -> pd.DataFrame:
    """A results table (CSV, Parquet, JSON) read by `storlab.fileio.read_table`, the one
    table reader; its one-line errors become EstimateErrors."""
    from ..fileio import read_table

    try:
        return read_table(path)
    except EstimateError:
        raise
    except StorlabError as exc:
        raise EstimateError(str(exc)) from None
