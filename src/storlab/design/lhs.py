"""Latin Hypercube samples over mixed spaces (scipy.stats.qmc's LatinHypercube; without
optimisation its draws are made here, the same numbers, so a tuning's screening does not
wait for scipy.stats to import: about 1 s of CPU before the first run).

Continuous factors take the sampled coordinate directly. Discrete factors (categorical,
ordinal, listed values, narrow integer ranges) take their level from the stratum index,
in order, so each of L levels appears floor(n/L) or ceil(n/L) times: as evenly as n runs
allow, the levels that get the extra run drawn with the seed (`extra_levels="seeded"`; the
earlier mapping, `"first"`, gave them to the same levels in every design and is kept only so a
campaign planned with it resumes). Constraints are honoured by swapping values between rows
within one column, which keeps every column's strata; only when swaps cannot repair a row
is it redrawn (and `meta["strata_exact"]` says so).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import DesignError
from ..space import Space
from .base import Design

OPTIMIZATIONS = (None, "random-cd", "lloyd")
EXTRA_LEVELS = ("seeded", "first")


def lhs_design(space: Space, n: int, seed: int | None = None,
               optimize: str | None = None, max_repair: int = 2000,
               extra_levels: str = "seeded") -> Design:
    """`n` Latin Hypercube runs over `space`, reproducible for a seed."""
    if n < 1:
        raise DesignError(f"an LHS design needs at least one run, not {n}")
    if optimize not in OPTIMIZATIONS:
        raise DesignError(f"optimisation {optimize!r} must be one of random-cd, lloyd")
    if extra_levels not in EXTRA_LEVELS:
        raise DesignError(f"extra_levels {extra_levels!r} must be one of seeded, first")
    rng = np.random.default_rng(seed)
    u = latin_hypercube(space.k, n, rng, optimize)
    table = _natural(space, u, rng if extra_levels == "seeded" else None)
    strata_exact = True
    if space.constraints:
        table, u, strata_exact = _honour_constraints(space, table, u, rng, max_repair)
    table["run"] = np.arange(1, n + 1)
    table["std_order"] = np.arange(1, n + 1)
    table["replicate"] = 1
    table["block"] = 1
    table["center"] = False
    meta = {"kind": "lhs", "seed": seed, "optimization": optimize,
            "strata_exact": strata_exact, "resolution": None, "extra_levels": extra_levels}
    return Design(space, table, pd.DataFrame(u, columns=space.names), meta)


def latin_hypercube(d: int, n: int, rng: np.random.Generator, optimize: str | None = None
                    ) -> np.ndarray:
    """`n` points of a Latin Hypercube in [0, 1)^d: the numbers (and the state `rng` is left
    in) of scipy.stats.qmc.LatinHypercube(d, optimization=optimize, rng=rng).random(n)."""
    if optimize is not None:
        from scipy.stats import qmc

        return qmc.LatinHypercube(d=d, optimization=optimize, rng=rng).random(n)
    # scipy's engine spawns a child generator it owns, jitters each point in its stratum and
    # shuffles the strata per dimension (tests/design holds the two equal)
    own = rng.spawn(1)[0]
    jitter = own.uniform(size=(n, d))
    perms = np.tile(np.arange(1, n + 1), (d, 1))
    for i in range(d):
        own.shuffle(perms[i, :])
    return (perms.T - jitter) / n


def _natural(space: Space, u: np.ndarray, rng: np.random.Generator | None) -> pd.DataFrame:
    """The design's values; discrete levels from the strata (`rng`: the seeded offset)."""
    n = u.shape[0]
    cols = {}
    for j, f in enumerate(space.factors):
        levels = f.levels
        if levels is not None:
            stratum = np.minimum(np.floor(u[:, j] * n).astype(np.int64), n - 1)
            # Stratum s takes level floor((s + o) * L / n): with o = 0 (the earlier mapping)
            # the levels that get floor(n/L) + 1 runs were the same in every design (6 runs
            # of a 5-level factor measured its first level twice, always); a seeded offset o
            # in [0, 1) gives the extra runs to each level equally often and keeps the
            # strata (L > n: evenly spaced levels, shifted).
            offset = rng.random() if rng is not None else 0.0
            idx = np.floor((stratum + offset) * len(levels) / n).astype(np.int64)
            cols[f.name] = f.level_values(np.minimum(idx, len(levels) - 1))  # float rounding
        else:
            cols[f.name] = f.from_unit(u[:, j])
    return pd.DataFrame(cols)


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
    # The swaps are tried on plain columns (a two-row DataFrame per try cost most of the
    # time) and written back to the table once, in its own dtypes.
    cols = {c: table[c].to_numpy(copy=True) for c in names}
    changed: set[str] = set()
    while not ok.all() and tries < max_repair:
        tries += 1
        bad = rng.choice(np.flatnonzero(~ok))
        j = involved[rng.integers(len(involved))]
        other = rng.integers(n)
        if other == bad:
            continue
        rows = [bad, other]
        col = names[j]
        swapped = {c: v[rows] for c, v in cols.items()}
        swapped[col] = swapped[col][::-1]
        feas = space.feasible(swapped)
        # Accept when the bad row is fixed and the other row does not break.
        if feas[0] and (feas[1] or not ok[other]):
            cols[col][rows] = swapped[col]
            changed.add(col)
            u[rows, j] = u[rows[::-1], j]
            ok[bad], ok[other] = True, bool(feas[1])
    for c in changed:
        table[c] = pd.Series(cols[c], index=table.index, dtype=table[c].dtype)
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
