"""Estimate mixed read/write performance from minimal measurements: the f_rw capacity
model of Ra & Lee (MSST 2019), fitted per I/O size, with size mixes and intervals.
This package is the model's face; its jobs live in cells, fit, uncertainty, mixrule,
modelerror, predict, rwmodel, plots and tables. `measure` plans and runs the fio
measurements (through the campaign loop); `quietdev` makes a quiet device (zram, loop on
tmpfs) to measure on.

Claim: with hardware, software and workload fixed, the total processing capability

    C = T_read + f_rw * T_write,        f_rw = T_100%read / T_100%write

is invariant for a given I/O size. At a read percentage R (0-100) the slides give

    k = T_100%read / (R + (100 - R) * f_rw),   T_read = k * R,   T_write = k * (100 - R)

and for a mix of sizes S_i with I/O-count proportions P_i (sum 1) two rules:

    1 / T_total = sum_i P_i / T_total^{S_i}                  (mix="harmonic", the default)
    T_total = 100 * sum_i P_i * k^{S_i}                      (mix="slides", the seed's formula)

The read/write part of the model is a harmonic mean of per-operation costs
(1 / T_total = R/100 / T_100%read + (100-R)/100 / T_100%write). `harmonic` applies the same
cost argument to sizes: every I/O takes 1/T^{S_i} of the shared capacity, and the stream keeps
the requested size proportions. The slides' formula averages the per-size throughputs, which
holds only when the sizes do not share the bottleneck; on one device it over-predicts a
4k/64k mix 2.6-2.9x, so harmonic is the default and `slides` stays available by
name.

Fitting: from the 0 % and 100 % read cells alone (`method="anchors"`, the slides' two
points), from 0/50/100 % by least squares (`method="anchors3"`, a third anchor that corrects
a bias of the two-point line), or by least squares over every measured mix (`method="lsq"`):
r_j = C - f_rw * w_j over the cell means (r_j, w_j). Either way C_j = r_j + f_rw * w_j is
computed for every measured mix and its spread says how invariant C really is.

Uncertainty: each cell keeps the mean, variance and covariance of its replicate read and
write throughputs. A prediction is a smooth function of the cell means, so its noise variance
comes from the delta method (numerical Jacobian). Model error: when a size has more measured
mixes than its fit needs, every mix is predicted by a fit that did not use it (held out, or
left out and refitted) and the relative errors beyond their own noise give the model's
relative error variance, each size's own shrunk toward the others' by empirical Bayes
(`modelerror`); it is added to the noise variance (Student-t, the smaller of the two parts'
degrees of freedom). With only the two anchors the model error cannot be seen, and the
interval says it is noise-only. It is an interval for the mean throughput, not for a single
future run.
"""

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
