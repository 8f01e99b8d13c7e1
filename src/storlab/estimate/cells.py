"""The measured cells of the f_rw model: the replicates at one (I/O size, read percentage),
and the checks of the values a cell and a size mix may hold."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import units
from ..errors import EstimateError, UnitsError


def size_bytes(value: Any) -> int:
    """An I/O size ("4k", "64KiB", 4096) as whole bytes (`storlab.units` grammar)."""
    try:
        return units.parse_size(value, "I/O size")
    except UnitsError as exc:
        raise EstimateError(str(exc)) from None


#: 4096 -> '4k' (fio's binary suffixes); `storlab.units.format_size`.
size_label = units.format_size


def check_read_pct(value: Any) -> float:
    """A read percentage in [0, 100] as a float; a clear error otherwise."""
    try:
        p = float(value)
    except (TypeError, ValueError):
        raise EstimateError(f"read percentage {value!r} is not a number") from None
    if not math.isfinite(p) or p < 0 or p > 100:
        raise EstimateError(f"read percentage {value!r} is outside 0-100")
    return p


def parse_size_mix(spec: str | Mapping[Any, float]) -> dict[int, float]:
    """Size proportions from "4k:0.8,64k:0.2" (or a mapping) as {bytes: P}; P sum to 1."""
    try:
        return units.parse_size_mix(spec, "size mix", exact=True)
    except UnitsError as exc:
        raise EstimateError(str(exc)) from None


@dataclass(frozen=True)
class Cell:
    """The replicates measured at one (I/O size, read percentage): means, spread, count.

    Variances are sample variances (ddof=1) of single runs; NaN when n < 2."""

    read_pct: float
    n: int
    read_iops: float
    write_iops: float
    read_var: float = math.nan
    write_var: float = math.nan
    rw_cov: float = math.nan

    @classmethod
    def from_samples(cls, read_pct: float, reads: Sequence[float], writes: Sequence[float]
                     ) -> Cell:
        """Aggregate replicate runs (read and write IOPS of each run)."""
        r = np.asarray(reads, dtype=float)
        w = np.asarray(writes, dtype=float)
        if r.shape != w.shape or r.size == 0:
            raise EstimateError(f"read {read_pct:g}%: need as many read as write values, >= 1")
        for i, (a, b) in enumerate(zip(r, w)):
            check_throughput(float(read_pct), float(a), float(b), f"run {i + 1}")
        if r.size >= 2:
            cov = np.cov(np.vstack([r, w]), ddof=1)
            rv, wv, c = float(cov[0, 0]), float(cov[1, 1]), float(cov[0, 1])
        else:
            rv = wv = c = math.nan
        return cls(float(read_pct), int(r.size), float(r.mean()), float(w.mean()), rv, wv, c)

    @property
    def total_iops(self) -> float:
        return self.read_iops + self.write_iops

    def mean_cov(self) -> np.ndarray | None:
        """Covariance matrix of the two means (read, write), or None without replicates."""
        if self.n < 2 or not math.isfinite(self.read_var):
            return None
        return np.array([[self.read_var, self.rw_cov], [self.rw_cov, self.write_var]]) / self.n

    def to_dict(self) -> dict[str, Any]:
        return {"read_pct": self.read_pct, "n": self.n, "read_iops": self.read_iops,
                "write_iops": self.write_iops, "read_var": _nan_none(self.read_var),
                "write_var": _nan_none(self.write_var), "rw_cov": _nan_none(self.rw_cov)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> Cell:
        try:
            return cls(check_read_pct(d["read_pct"]), int(d.get("n", 1)),
                       float(d["read_iops"]), float(d["write_iops"]),
                       _none_nan(d.get("read_var")), _none_nan(d.get("write_var")),
                       _none_nan(d.get("rw_cov")))
        except KeyError as exc:
            raise EstimateError(f"{where}: cell lacks field {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise EstimateError(f"{where}: bad cell {dict(d)!r}: {exc}") from None


def check_throughput(read_pct: float, read: float, write: float, where: str = "") -> None:
    """Refuse what the model cannot use: a negative or non-finite rate, a zero where the mix
    has I/O (100 % read needs reads > 0, 0 % writes > 0, a mix both)."""
    tail = f" ({where})" if where else ""
    for name, v in (("read", read), ("write", write)):
        if not math.isfinite(v) or v < 0:
            raise EstimateError(f"read {read_pct:g}%: {name} throughput {v:g} must be finite "
                                f"and >= 0{tail}")
    if read_pct == 100.0 and not read > 0:
        raise EstimateError(f"100% read throughput is {read:g}{tail}; the capacity "
                            "C = T_100%read needs it > 0")
    if read_pct == 0.0 and not write > 0:
        raise EstimateError(f"100% write throughput is {write:g}{tail}; "
                            "f_rw = T_100%read / T_100%write needs it > 0")
    for name, v, has in (("read", read, read_pct > 0), ("write", write, read_pct < 100)):
        if has and not v > 0:
            raise EstimateError(f"read {read_pct:g}%: {name} throughput is {v:g}{tail}; a "
                                f"mix with {name}s needs it > 0")


def _nan_none(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _none_nan(x: Any) -> float:
    return math.nan if x is None else float(x)
