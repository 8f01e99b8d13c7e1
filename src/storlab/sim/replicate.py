"""Independent replications: per-operation means with intervals that hold when a single
run's batch means do not.

One run's batch-means interval assumes its batches are nearly independent. After a
failure, a closed loop's split of latency between operations swings slowly (PUT and GET
trade tens of milliseconds over tens of thousands of requests while the total holds), so
twenty batches of one run see one or two swings and their interval comes out 2-5x too
narrow (measured: benchmarks/bench_sim.py --fidelity). Runs with different seeds are
independent by construction: the Student-t interval over their means is honest whatever
the autocorrelation inside a run (the method of independent replications; Law, "Simulation
Modeling and Analysis", McGraw-Hill, 5th ed. 2015, section 9.4).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .summary import t95

if TYPE_CHECKING:
    import pandas as pd

    from .model import ClusterModel
    from .summary import SimReport

#: The per-operation columns replicated, each with its interval column.
COLUMNS = {"ops_s": "ops_s_ci95", "lat_mean_ms": "lat_mean_ci95_ms"}


@dataclass
class Replicated:
    """Per-operation means over independent runs (`ops`: op, runs, each column of COLUMNS
    with its 95 % half-width over the runs and the median single-run batch half-width) and
    each run's own table (`runs`)."""

    ops: pd.DataFrame
    runs: list[pd.DataFrame]

    def agrees_with(self, other: Replicated, level: float = 0.95) -> pd.DataFrame:
        """Per operation (not the total) and column: the two means' difference against
        its interval (Welch: each mean's variance over its runs, added). The claim is that
        no mean drifts, one claim over all of them, so each interval is Bonferroni's: at
        1 - (1 - level) / comparisons, and all differences lie inside with probability
        `level` or more when nothing drifts."""
        import pandas as pd
        from scipy.stats import t as student_t

        a, b = self.ops.set_index("op"), other.ops.set_index("op")
        ops = [op for op in a.index.intersection(b.index) if op != "ALL"]
        if not ops:
            raise ValueError("the two replications share no operation to compare")
        q = 1.0 - (1.0 - level) / (2 * len(ops) * len(COLUMNS))
        rows = []
        for op in ops:
            for col in COLUMNS:
                sa, sb = a.loc[op, f"{col}_sd"], b.loc[op, f"{col}_sd"]
                na, nb = int(a.loc[op, "runs"]), int(b.loc[op, "runs"])
                va, vb = sa**2 / na, sb**2 / nb
                # Welch-Satterthwaite degrees of freedom for the difference.
                den = va**2 / (na - 1) + vb**2 / (nb - 1)
                dof = (va + vb) ** 2 / den if den > 0 else float(na + nb - 2)
                half = float(student_t.ppf(q, dof)) * math.sqrt(va + vb)
                diff = float(b.loc[op, col] - a.loc[op, col])
                rows.append({"op": op, "column": col, "difference": diff, "ci": half,
                             "within": abs(diff) <= half})
        return pd.DataFrame(rows)


def replicate(make: Callable[[int], ClusterModel], seeds: Sequence[int],
              run: Callable[[ClusterModel], SimReport] | None = None) -> Replicated:
    """Run the model `make(seed)` builds once per seed (each an independent replication)
    and average each operation's figures over the runs, with a Student-t 95 % interval."""
    import pandas as pd

    if len(seeds) < 2:
        raise ValueError(f"replications need 2 or more seeds, got {len(seeds)}")
    if run is None:
        from .run import run_model as run
    tables = [run(make(int(s))).ops.set_index("op") for s in seeds]
    ops = [op for op in tables[0].index if all(op in t.index for t in tables)]
    rows: list[dict[str, Any]] = []
    for op in ops:
        row: dict[str, Any] = {"op": op, "runs": len(tables)}
        for col, ci in COLUMNS.items():
            x = np.array([float(t.loc[op, col]) for t in tables])
            sd = float(np.std(x, ddof=1))
            row[col] = float(x.mean())
            row[ci] = t95(x.size - 1) * sd / math.sqrt(x.size)
            row[f"{col}_sd"] = sd
            if ci in tables[0].columns:
                row[f"{ci}_single"] = float(np.median([float(t.loc[op, ci]) for t in tables]))
        rows.append(row)
    return Replicated(pd.DataFrame(rows), [t.reset_index() for t in tables])
