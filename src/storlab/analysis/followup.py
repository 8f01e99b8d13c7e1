"""Seed 002's follow-up step: after a screening design (Plackett-Burman or a fraction) has
ranked the parameters, a full (or fractional) factorial on the few that matter, so their
interactions can be estimated."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import DesignError
from ..space import Space

if TYPE_CHECKING:
    import pandas as pd


def follow_up_space(results: pd.DataFrame, space: Space, response: str, top: int,
                    goal: str | None = None, alpha: float = 0.05,
                    transform: str = "none") -> tuple[Space, pd.DataFrame]:
    """The space of the `top` factors with the largest main effects on `response` in the
    screening `results` (kept in the space's order), and the ranking they came from (every
    factor's main effect, largest first). Main effects only: a screening design cannot
    separate interactions from them."""
    from ..analysis.effects import analyze

    if top < 1:
        raise DesignError(f"--top {top}: must be at least 1")
    a = analyze(results, response, space=space, goal=goal, alpha=alpha, max_order=1,
                transform=transform)
    cols = ["term", "effect", *(c for c in ("pct", "p", "significant") if c in a.effects)]
    ranking = a.effects[a.effects["term"].isin(space.names)][cols].reset_index(drop=True)
    if top > len(ranking):
        raise DesignError(f"--top {top}: the screening ranked only {len(ranking)} factors")
    chosen = set(ranking["term"].iloc[:top])
    return space.subspace([n for n in space.names if n in chosen]), ranking
