"""The follow-up step: after a screening design (Plackett-Burman or a fraction) has
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


def follow_up_note(ranking: pd.DataFrame, top: int, alpha: float = 0.05) -> str | None:
    """What the user must know about the factors chosen from `ranking` (the screening's main
    effects, largest first): None when each of the `top` is significant; else that none
    or only some are, so that a follow-up on effects indistinguishable from noise is not
    presented as one on the factors that matter."""
    if "significant" not in ranking.columns:
        return None
    chosen = ranking.iloc[:top]
    sig = chosen["significant"].astype(bool)
    if sig.all():
        return None
    if not ranking["significant"].astype(bool).any():
        return (f"no main effect is significant at alpha {alpha:g}: the top {top} are only "
                "the largest effects measured, not shown to matter (replicate the screening "
                "or give it more runs before following it up)")
    weak = ", ".join(str(t) for t in chosen.loc[~sig, "term"])
    n = int(sig.sum())
    return (f"only {n} of the top {top} main effects {'is' if n == 1 else 'are'} significant "
            f"at alpha {alpha:g}; {weak} chosen by size alone")
