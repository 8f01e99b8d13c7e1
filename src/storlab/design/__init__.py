"""Experiment designs, one module per family (as SALib's `sample/`): `factorial` (full
and 2^(k-p) fractional, foldover), `pb` (Plackett-Burman), `lhs` (Latin Hypercube).
`make_design` builds any of them with center points, replicates and run order."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import DesignError
from ..limits import MAX_FACTORS, MAX_RUNS, MAX_SEED
from ..space import Space
from .aliasing import alias_chains, parse_resolution, roman
from .base import Design, add_center_points, randomize, replicate
from .factorial import foldover, fractional_factorial, full_factorial
from .lhs import lhs_design
from .pb import plackett_burman

KINDS = ("full", "fractional", "pb", "lhs")

__all__ = ["KINDS", "MAX_FACTORS", "MAX_RUNS", "Design", "add_center_points", "alias_chains",
           "foldover", "fractional_factorial", "full_factorial", "lhs_design", "make_design",
           "parse_resolution", "plackett_burman", "randomize", "replicate", "roman"]


def make_design(space: Space, kind: str, *, runs: int | None = None,
                resolution: int | None = None, generators: Sequence[str] | None = None,
                center: int = 0, replicates: int = 1, seed: int | None = None,
                randomize_order: bool = True, optimize: str | None = None,
                fold: str | None = None, extra_levels: str = "seeded") -> Design:
    """Build a design of `kind` (full, fractional, pb, lhs) over `space`.

    The contract callers rely on (the campaign, the CLI, the report): `space` and `kind`
    positional, every option keyword-only with these names; None means "the kind's default".

    Center points are added before replication, so each replicate carries them; the run
    order is shuffled (reproducibly for `seed`) unless `randomize_order` is False.
    `fold` ("all" or a factor name) appends a foldover of a two-level design.
    `extra_levels` (LHS only): "seeded", or "first" to rebuild a plan made before the LHS
    drew which levels get the extra runs (`lhs_design`).
    """
    if space.k > MAX_FACTORS:
        raise DesignError(f"{space.k} factors: at most {MAX_FACTORS}")
    for name, value, low in (("runs", runs, 1), ("center", center, 0),
                             ("replicates", replicates, 1)):
        if value is not None and not low <= value <= MAX_RUNS:
            raise DesignError(f"{name} {value}: must be between {low} and {MAX_RUNS}")
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise DesignError(f"seed {seed}: must be between 0 and {MAX_SEED}")
    if kind == "full":
        d = full_factorial(space)
    elif kind == "fractional":
        d = fractional_factorial(space, runs=runs, resolution=resolution, generators=generators)
    elif kind == "pb":
        d = plackett_burman(space, runs=runs)
    elif kind == "lhs":
        if runs is None:
            raise DesignError("an LHS design needs --runs N")
        d = lhs_design(space, runs, seed=seed, optimize=optimize, extra_levels=extra_levels)
    else:
        raise DesignError(f"design kind {kind!r} must be one of {', '.join(KINDS)}")
    if space.constraints and kind != "lhs":
        bad = ~space.feasible(d.table)
        if bad.any():
            rows = ", ".join(str(i + 1) for i in list(bad.nonzero()[0])[:8])
            broken = [c.text for c in space.constraints if not c.mask(d.table[bad]).all()]
            raise DesignError(f"runs {rows} (standard order) violate {broken}: a {kind} design "
                              "cannot skip runs; move the factors' low/high inside the "
                              "feasible region or use --kind lhs")
    if fold:
        d = foldover(d, None if fold == "all" else fold)
    total = (d.runs + center) * replicates
    if total > MAX_RUNS:
        raise DesignError(f"{d.runs} runs + {center} center points, x {replicates} "
                          f"replicates = {total} runs: at most {MAX_RUNS}")
    if center:
        if kind == "lhs":
            raise DesignError("center points belong to two-level designs, not LHS")
        d = add_center_points(d, center)
    if replicates > 1:
        d = replicate(d, replicates)
    d.meta["seed"] = seed
    if randomize_order:
        d = randomize(d, seed)
    return d
