"""The f_rw model over I/O sizes (`RWModel`): per-size fits, predictions of size mixes,
result tables, warnings, and the JSON file it is saved in."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..errors import EstimateError
from ..jsonutil import to_jsonable
from ..result_shape import Result
from .cells import Cell, check_read_pct, parse_size_mix, size_bytes, size_label
from .fit import SizeFit, shape_warnings, solve
from .mixrule import DEFAULT_MIX, check_mix
from .modelerror import ERROR_KINDS, Shrinkage, pooled_model_error, shrunk_model_errors
from .predict import Prediction, predict_frame
from .uncertainty import delta_interval

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MODEL_FORMAT = "storlab-estimate-model"
MODEL_VERSION = 1


@dataclass
class RWModel(Result):
    """Per-I/O-size f_rw fits plus everything needed to predict, check and save them."""

    PLOT_KINDS = ("model",)
    ERROR = EstimateError

    fits: dict[int, SizeFit]
    spread_threshold: float = 0.10
    meta: dict[str, Any] = field(default_factory=dict)

    # -- construction ---------------------------------------------------------------
    @classmethod
    def from_cells(cls, cells: Mapping[Any, Iterable[Cell]], method: str = "auto",
                   spread_threshold: float = 0.10, meta: Mapping[str, Any] | None = None
                   ) -> RWModel:
        """Fit every size from its cells ({size: [Cell, ...]})."""
        if not cells:
            raise EstimateError("no measurements to fit")
        fits: dict[int, SizeFit] = {}
        for s, cs in cells.items():
            b = size_bytes(s)
            if b in fits:
                raise EstimateError(f"size {size_label(b)} given twice")
            fits[b] = SizeFit.fit(b, cs, method)
        return cls(dict(sorted(fits.items())), float(spread_threshold), dict(meta or {}))

    @classmethod
    def from_anchors(cls, anchors: Mapping[Any, tuple[float, float]], **kw: Any) -> RWModel:
        """The slides' two-point model from {size: (T_100%read, T_100%write)} in IOPS."""
        return cls.from_cells({s: [Cell(100.0, 1, float(r), 0.0), Cell(0.0, 1, 0.0, float(w))]
                               for s, (r, w) in anchors.items()}, method="anchors", **kw)

    # -- queries --------------------------------------------------------------------
    @property
    def sizes(self) -> list[int]:
        return list(self.fits)

    def fit_for(self, size: Any) -> SizeFit:
        b = size_bytes(size)
        if b not in self.fits:
            known = ", ".join(size_label(s) for s in self.fits)
            raise EstimateError(f"size {size_label(b)} is not in the model (it has {known})")
        return self.fits[b]

    @property
    def warnings(self) -> list[str]:
        """One line per size whose C is not invariant across its measured mixes."""
        out = []
        for sf in self.fits.values():
            if len(sf.cells) >= 3 and sf.c_spread > self.spread_threshold:
                out.append(f"size {sf.label}: C = T_read + f_rw*T_write varies by "
                           f"{sf.c_spread:.1%} across its {len(sf.cells)} measured mixes "
                           f"(threshold {self.spread_threshold:.0%}); the capacity is not "
                           "invariant, so predictions between them are doubtful")
            out += shape_warnings(sf)
        return out

    def predict(self, read_pct: float, proportions: Mapping[Any, float] | str | None = None,
                mix: str = DEFAULT_MIX, confidence: float = 0.95,
                model_error: bool = True, error: str = "shrunk",
                pool: bool | None = None) -> Prediction:
        """Read, write, total IOPS and bandwidth at `read_pct` for a size mix given as
        {size: P} or "4k:0.8,64k:0.2" (I/O-count proportions summing to 1). It may be
        omitted only when the model has a single size. The intervals include the model's
        error when it was measured (`Prediction.interval` says): by default each size's own
        shrunk toward the others' (`error="shrunk"`), or `"pooled"` over every size, or
        each size's `"own"` alone (`modelerror`). `pool` is the deprecated spelling:
        True means `error="pooled"`, False `error="own"`."""
        error = _pool_alias(pool, error)
        p = check_read_pct(read_pct)
        check_mix(mix)
        if error not in ERROR_KINDS:
            raise EstimateError(f"model error {error!r} is not one of {', '.join(ERROR_KINDS)}")
        if proportions is None:
            if len(self.fits) != 1:
                raise EstimateError("the model has several sizes: give their proportions, "
                                    "e.g. 4k:0.8,64k:0.2")
            props = {self.sizes[0]: 1.0}
        else:
            props = parse_size_mix(proportions)
        fits = [self.fit_for(s) for s in props]
        errors = self.size_errors(error) if model_error else None
        frame, interval = predict_frame(fits, props, p, mix, confidence,
                                        [errors[sf.size] for sf in fits] if errors else None)
        return Prediction(p, props, mix, confidence, frame, self, interval)

    def predict_size(self, size: Any, read_pct: float, confidence: float = 0.95,
                     model_error: bool = True, error: str = "shrunk",
                     pool: bool | None = None) -> Prediction:
        """Shortcut for one size alone."""
        return self.predict(read_pct, {size_bytes(size): 1.0}, confidence=confidence,
                            model_error=model_error, error=_pool_alias(pool, error))

    def model_error(self) -> tuple[float, int]:
        """The model's relative error beyond noise and its degrees of freedom, from every
        size's and mix's leave-one-out errors pooled (`error="pooled"` in `predict`)."""
        return pooled_model_error(list(self.fits.values()))

    @cached_property
    def shrinkage(self) -> Shrinkage:
        """Each size's model error shrunk toward the pooled one (`modelerror`), the default
        of `predict`; computed once per model (the fits do not change)."""
        return shrunk_model_errors(list(self.fits.values()))

    def size_errors(self, error: str = "shrunk") -> dict[int, tuple[float, float]]:
        """{size: (relative SD, degrees of freedom)} of the model error `predict` uses."""
        if error == "own":
            return {s: (sf.model_sd, float(sf.model_df)) for s, sf in self.fits.items()}
        if error == "pooled":
            sd, df = self.model_error()
            return {s: (sd, float(df)) for s in self.fits}
        return self.shrinkage.sizes

    # -- result tables --------------------------------------------------------------
    def to_frame(self, confidence: float = 0.95) -> pd.DataFrame:
        """One row per size: anchors, f_rw and C with intervals, fit method, C spread."""
        rows = []
        pooled_sd, pooled_df = self.model_error()
        shrunk = self.shrinkage.sizes
        for sf in self.fits.values():
            pcts = np.array([c.read_pct for c in sf.cells])

            def params(theta: np.ndarray, sf: SizeFit = sf, pcts: np.ndarray = pcts
                       ) -> np.ndarray:
                return np.array(solve(pcts, theta[0::2], theta[1::2], sf.method, sf.label))

            (cap, f), lo, hi = delta_interval(params, sf.cells, confidence)
            r100, w0 = sf.anchor(100.0), sf.anchor(0.0)
            rows.append({
                "size": sf.label, "method": sf.method, "mixes": len(sf.cells),
                "T100_read": r100.read_iops if r100 else math.nan,
                "T100_write": w0.write_iops if w0 else math.nan,
                "f_rw": f, "f_rw_lo": lo[1], "f_rw_hi": hi[1],
                "C": cap, "C_lo": lo[0], "C_hi": hi[0],
                "C_spread": sf.c_spread, "C_cv": sf.c_cv,
                "model_sd": sf.model_sd, "model_df": sf.model_df,
                "model_sd_pooled": pooled_sd, "model_df_pooled": pooled_df,
                # what predictions use: the size's own shrunk toward the pooled
                "model_sd_shrunk": shrunk[sf.size][0], "model_df_shrunk": shrunk[sf.size][1],
                "invariant": bool(len(sf.cells) < 3 or sf.c_spread <= self.spread_threshold),
            })
        return pd.DataFrame(rows)

    def capacity_table(self) -> pd.DataFrame:
        """One row per measured mix: the means, C_j and its deviation from the fitted C."""
        rows = []
        for sf in self.fits.values():
            for c, cj in zip(sf.cells, sf.capacities()):
                rows.append({"size": sf.label, "read_pct": c.read_pct, "n": c.n,
                             "read_iops": c.read_iops, "write_iops": c.write_iops,
                             "total_iops": c.total_iops, "C": cj,
                             "C_dev": cj / sf.capacity - 1.0, "used_in_fit": sf.used(c)})
        return pd.DataFrame(rows)

    def validation(self, confidence: float = 0.95) -> pd.DataFrame:
        """Predicted against measured total IOPS at every measured mix of every size."""
        rows = []
        for sf in self.fits.values():
            for c in sf.cells:
                pr = self.predict_size(sf.size, c.read_pct, confidence)
                pred = pr.value()
                rows.append({
                    "size": sf.label, "read_pct": c.read_pct, "used_in_fit": sf.used(c),
                    "n": c.n, "measured_iops": c.total_iops, "predicted_iops": pred,
                    "pred_lo": pr.value("total_iops_lo"), "pred_hi": pr.value("total_iops_hi"),
                    "error_pct": 100.0 * (pred - c.total_iops) / c.total_iops
                    if c.total_iops > 0 else math.nan,
                })
        return pd.DataFrame(rows)

    def plot(self, kind: str | None = None, confidence: float = 0.95, points: int = 101
             ) -> Figure:
        """`model` (the only kind). Left: measured total IOPS and the model's line per I/O
        size; right: C at every measured mix relative to the size's mean C
        (`plots.plot_model`)."""
        self.plot_kind(kind)
        from .plots import plot_model

        return plot_model(self, confidence, points)

    # -- persistence ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return to_jsonable({
            "format": MODEL_FORMAT, "version": MODEL_VERSION,
            "spread_threshold": self.spread_threshold, "meta": self.meta,
            "sizes": [{"size": sf.label, "size_bytes": sf.size, "method": sf.method,
                       "f_rw": sf.f_rw, "capacity": sf.capacity, "c_spread": sf.c_spread,
                       "cells": [c.to_dict() for c in sf.cells]}
                      for sf in self.fits.values()],
        })

    def save(self, path: str | Path) -> Path:
        from ..fileio import write_text

        return write_text(path, json.dumps(self.to_dict(), indent=2) + "\n")  # temp + rename

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "model") -> RWModel:
        """Rebuild from `to_dict` output. A size may instead give just `read_iops` and
        `write_iops` (the two anchors) for a hand-written model. Saved f_rw and capacity
        are checked against the refit so an edited file cannot silently disagree."""
        if not isinstance(d, Mapping) or d.get("format", MODEL_FORMAT) != MODEL_FORMAT:
            raise EstimateError(f"{source}: not a storlab estimate model "
                                f"(expected format {MODEL_FORMAT!r})")
        entries = d.get("sizes")
        if not isinstance(entries, list) or not entries:
            raise EstimateError(f"{source}: field 'sizes' must be a non-empty list")
        fits: dict[int, SizeFit] = {}
        for i, e in enumerate(entries):
            where = f"{source}: sizes[{i}]"
            if not isinstance(e, Mapping) or "size" not in e:
                raise EstimateError(f"{where}: needs a 'size'")
            b = size_bytes(e.get("size_bytes", e["size"]))
            if "cells" in e:
                cells = [Cell.from_dict(c, f"{where}.cells[{j}]")
                         for j, c in enumerate(e["cells"])]
                method = str(e.get("method", "auto"))
            elif "read_iops" in e and "write_iops" in e:
                try:
                    r, w = float(e["read_iops"]), float(e["write_iops"])
                except (TypeError, ValueError):
                    raise EstimateError(f"{where}: read_iops/write_iops must be numbers") from None
                cells = [Cell(100.0, 1, r, 0.0), Cell(0.0, 1, 0.0, w)]
                method = "anchors"
            else:
                raise EstimateError(f"{where}: needs 'cells' or 'read_iops' and 'write_iops'")
            try:
                sf = SizeFit.fit(b, cells, method)
            except EstimateError as exc:
                raise EstimateError(f"{where}: {exc}") from None
            for key, val in (("f_rw", sf.f_rw), ("capacity", sf.capacity)):
                if key in e and not math.isclose(float(e[key]), val, rel_tol=1e-6):
                    raise EstimateError(f"{where}: saved {key}={e[key]} disagrees with its "
                                        f"cells (refit gives {val:.6g})")
            if b in fits:
                raise EstimateError(f"{where}: size {size_label(b)} given twice")
            fits[b] = sf
        thr = float(d.get("spread_threshold", 0.10))
        return cls(dict(sorted(fits.items())), thr, dict(d.get("meta") or {}))

    @classmethod
    def load(cls, path: str | Path, what: str = "") -> RWModel:
        """The model saved at `path`, read once from one descriptor (`read_input_bytes`:
        a regular file, bounded, never a FIFO put at the name after a look)."""
        from ..fileio import read_text

        path = Path(path)
        if not path.exists() and not path.is_symlink():
            raise EstimateError(f"{path}: no such model file")
        return cls.loads(read_text(path, what), str(path))

    @classmethod
    def loads(cls, text: str, where: str) -> RWModel:
        """The model from its saved JSON `text` (`where` names it in errors)."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EstimateError(f"{where}: not JSON ({exc.msg}, line {exc.lineno})") from None
        return cls.from_dict(data, where)


def _pool_alias(pool: bool | None, error: str) -> str:
    """`error` from the deprecated `pool=` keyword of `predict` (True: pooled, False: own)."""
    if pool is None:
        return error
    warnings.warn("predict(pool=...) is deprecated: use error='pooled' or error='own'",
                  DeprecationWarning, stacklevel=3)
    return "pooled" if pool else "own"
