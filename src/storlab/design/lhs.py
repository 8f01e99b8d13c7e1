"""Latin Hypercube samples over mixed spaces (scipy.stats.qmc does the sampling).

Continuous factors take the sampled coordinate directly. Discrete factors (categorical,
ordinal, listed values, narrow integer ranges) take their level from the stratum index,
in order, so each of L levels appears floor(n/L) or ceil(n/L) times: as evenly as n runs
allow, the levels that get the extra run drawn with the seed. Constraints are honoured by swapping values between rows
within one column, which keeps every column's strata; only when swaps cannot repair a row
is it redrawn (and `meta["strata_exact"]` says so).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import qmc

from ..errors import DesignError
from ..space import Space
from .base import Design

OPTIMIZATIONS = (None, "random-cd", "lloyd")


def lhs_design(space: Space, n: int, seed: int | None = None,
               optimize: str | None = None, max_repair: int = 2000) -> Design:
    """`n` Latin Hypercube runs over `space`, reproducible for a seed."""
    if n < 1:
        raise DesignError(f"an LHS design needs at least one run, not {n}")
    if optimize not in OPTIMIZATIONS:
        raise DesignError(f"optimisation {optimize!r} must be one of random-cd, lloyd")
    rng = np.random.default_rng(seed)
    sampler = qmc.LatinHypercube(d=space.k, optimization=optimize, rng=rng)
    u = sampler.random(n)
    table = _natural(space, u, rng)
    strata_exact = True
    if space.constraints:
        table, u, strata_exact = _honour_constraints(space, table, u, rng, max_repair)
    table["run"] = np.arange(1, n + 1)
    table["std_order"] = np.arange(1, n + 1)
    table["replicate"] = 1
    table["block"] = 1
    table["center"] = False
    meta = {"kind": "lhs", "seed": seed, "optimization": optimize,
            "strata_exact": strata_exact, "resolution": None}
    return Design(space, table, pd.DataFrame(u, columns=space.names), meta)


def _natural(space: Space, u: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
    n = u.shape[0]
    cols = {}
    for j, f in enumerate(space.factors):
        levels = f.levels
        if levels is not None:
            stratum = np.minimum(np.floor(u[:, j] * n).astype(np.int64), n - 1)
            cols[f.name] = f.level_values(_level_of_stratum(len(levels), n, rng)[stratum])
        else:
            cols[f.name] = f.from_unit(u[:, j])
    return pd.DataFrame(cols)


def _level_of_stratum(n_levels: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Level index of each of the n strata, in level order: every level floor(n/L) times,
    and n mod L levels, drawn at random, once more. (floor(stratum * L / n) always gave
    the extra runs to the same levels, the first one among them: 6 runs of a 5-level
    factor measured its first level twice in every design.)"""
    counts = np.full(n_levels, n // n_levels)
    if n % n_levels:
        counts[rng.choice(n_levels, n % n_levels, replace=False)] += 1
    return np.repeat(np.arange(n_levels), counts)


def _honour_constraints(space: Space, table: pd.DataFrame, u: np.ndarray,
                        rng: np.random.Generator, max_repair: int
                        ) -> tuple[pd.DataFrame, np.ndarray, bool]:
    """Swap column entries between rows until every row is feasible (strata kept)."""
    names = space.names
    involved = sorted({names.index(c) for con in space.constraints for c in con.names})
    if not involved:
        return table, u, True
    n = len(table)
    ok = space.feasible(table)
    tries = 0
    while not ok.all() and tries < max_repair:
        tries += 1
        bad = rng.choice(np.flatnonzero(~ok))
        j = involved[rng.integers(len(involved))]
        other = rng.integers(n)
        if other == bad:
            continue
        rows = [bad, other]
        swapped = table.iloc[rows].copy()
        col = names[j]
        swapped[col] = swapped[col].to_numpy()[::-1]
        feas = space.feasible(swapped)
        # Accept when the bad row is fixed and the other row does not break.
        if feas[0] and (feas[1] or not ok[other]):
            table.iloc[rows, table.columns.get_loc(col)] = swapped[col].to_numpy()
            u[rows, j] = u[rows[::-1], j]
            ok[bad], ok[other] = True, bool(feas[1])
    if ok.all():
        return table, u, True
    # Some rows cannot be repaired by swaps: redraw them uniformly inside the feasible set.
    for i in np.flatnonzero(~ok):
        for _ in range(10_000):
            cand_u = rng.random((1, space.k))
            cand = _natural_point(space, cand_u)
            if space.feasible(cand)[0]:
                table.iloc[i] = cand.iloc[0]
                u[i] = cand_u[0]
                break
        else:
            raise DesignError("the constraints leave (almost) no feasible configuration")
    return table, u, False


def _natural_point(space: Space, u: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({f.name: f.from_unit(u[:, j]) for j, f in enumerate(space.factors)})
