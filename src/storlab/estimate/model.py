"""The f_rw capacity model for mixed read/write performance (Ra & Lee, MSST 2019).

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
4k/64k mix 2.6-2.9x (issue 13), so harmonic is the default and `slides` stays available by
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
relative error variance; it is added to the noise variance (Welch-Satterthwaite degrees of
freedom over both parts). With only the two anchors the model error cannot be seen, and the
interval says it is noise-only. It is an interval for the mean throughput, not for a single
future run.

This module is the model's face (issue 14 split it by job); every name callers import from
here is re-exported from the module that holds it:

- `cells`: `Cell`, size and read-percentage checks; `fit`: `SizeFit`, the fitting methods;
- `uncertainty`: the delta method and t bounds; `mixrule`: the size-mix rules;
- `predict`: `Prediction`; `rwmodel`: `RWModel` and its file; `plots`: its figures;
- `tables`: results tables in (`fit_table`, `split_table`, `mixed_checks`, ...).
"""

from __future__ import annotations

from ..errors import EstimateError, StorlabError, UnitsError
from .cells import (Cell, check_read_pct, check_throughput, parse_size_mix, size_bytes,
                    size_label)
from .fit import METHODS, SizeFit, fit_mask
from .mixrule import DEFAULT_MIX, MIXES
from .predict import NOISE_ONLY, QUANTITIES, WITH_MODEL, Prediction
from .rwmodel import MODEL_FORMAT, MODEL_VERSION, RWModel
from .tables import (READ_PCT_NAMES, SIZE_NAMES, fit_table, is_mix, mixed_checks, read_results,
                     samples_from_table, split_table)

__all__ = [
    "DEFAULT_MIX", "METHODS", "MIXES", "MODEL_FORMAT", "MODEL_VERSION", "NOISE_ONLY",
    "QUANTITIES", "READ_PCT_NAMES", "SIZE_NAMES", "WITH_MODEL", "Cell", "EstimateError",
    "Prediction", "RWModel", "SizeFit", "StorlabError", "UnitsError", "check_read_pct",
    "check_throughput", "fit_mask", "fit_table", "is_mix", "mixed_checks", "parse_size_mix",
    "read_results", "samples_from_table", "size_bytes", "size_label", "split_table",
]
