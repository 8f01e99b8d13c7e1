"""Estimate mixed read/write performance from minimal measurements: the f_rw capacity
model of Ra & Lee (MSST 2019), fitted per I/O size, with size mixes and intervals.
`model` is the model's face; its jobs live in cells, fit, uncertainty, mixrule, predict,
rwmodel, plots and tables. `measure` plans and runs the fio measurements (through the
campaign loop); `quietdev` makes a quiet device (zram, loop on tmpfs) to measure on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

_lazy_names, __getattr__, __dir__ = attach(__name__, {
    "DEFAULT_MIX": ".mixrule", "MIXES": ".mixrule", "METHODS": ".fit", "SizeFit": ".fit",
    "Cell": ".cells", "parse_size_mix": ".cells", "size_label": ".cells",
    "Prediction": ".predict", "RWModel": ".rwmodel",
    **{n: ".tables" for n in ("fit_table", "mixed_checks", "read_results", "split_table")},
    "EstimateError": "storlab.errors", "QuietDeviceError": "storlab.errors",
    "MeasurePlan": ".measure", "MeasureResult": ".measure", "run_plan": ".measure",
    "QuietDevice": ".quietdev", "quiet_device": ".quietdev",
})

__all__ = ["Cell", "DEFAULT_MIX", "EstimateError", "METHODS", "MIXES", "MeasurePlan",
           "MeasureResult", "Prediction", "QuietDevice", "QuietDeviceError", "RWModel", "SizeFit",
           "fit_table", "mixed_checks", "parse_size_mix", "quiet_device", "read_results",
           "run_plan", "size_label", "split_table"]

if TYPE_CHECKING:  # the names above, for type checkers and readers; loaded lazily at run time
    from ..errors import EstimateError, QuietDeviceError
    from .cells import Cell, parse_size_mix, size_label
    from .fit import METHODS, SizeFit
    from .measure import MeasurePlan, MeasureResult, run_plan
    from .mixrule import DEFAULT_MIX, MIXES
    from .predict import Prediction
    from .quietdev import QuietDevice, quiet_device
    from .rwmodel import RWModel
    from .tables import fit_table, mixed_checks, read_results, split_table
