"""The follow-up step: after a screening design (Plackett-Burman or a fraction) has
ranked the parameters, a full (or fractional) factorial on the few that matter, so their
interactions can be estimated."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import DesignError
from ..space import Space

if TYPE_CHECKING:
    import pandas as pd

    from .effects import EffectsAnalysis, Lenth

#: How the screening's significance is corrected for testing every factor at once.
CORRECTION = "Holm"


def follow_up_space(results: pd.DataFrame, space: Space, response: str, top: int,
                    goal: str | None = None, alpha: float = 0.05,
                    transform: str = "none") -> tuple[Space, pd.DataFrame]:
    """The space of the `top` factors with the largest main effects on `response` in the
    screening `results` (kept in the space's order), and the ranking they came from (every
    factor's main effect, largest first, with `p_holm` and `significant` after Holm's
    correction for testing them all). See `follow_up` for the interactions."""
    sub, ranking, _ = follow_up(results, space, response, top, goal, alpha, transform)
    return sub, ranking


def follow_up(results: pd.DataFrame, space: Space, response: str, top: int,
              goal: str | None = None, alpha: float = 0.05, transform: str = "none"
              ) -> tuple[Space, pd.DataFrame, str | None]:
    """`follow_up_space`, and a note when a significant two-factor interaction involves a
    factor left out. The main effects are tested in the model with the two-factor
    interactions the design can estimate (a resolution V fraction): in a main-effects-only
    model a real interaction sits in the error and hides real main effects. A
    Plackett-Burman or resolution III screening has none to add: main effects only."""
    from ..analysis.effects import analyze

    if top < 1:
        raise DesignError(f"--top {top}: must be at least 1")
    a = analyze(results, response, space=space, goal=goal, alpha=alpha, max_order=2,
                transform=transform)
    cols = ["term", "effect", *(c for c in ("pct", "p", "basis") if c in a.effects)]
    mains = a.effects[(a.effects["order"] == 1) & a.effects["term"].isin(space.names)]
    ranking = holm(mains[cols].reset_index(drop=True), a.lenth, alpha)
    if top > len(ranking):
        raise DesignError(f"--top {top}: the screening ranked only {len(ranking)} factors")
    chosen = set(ranking["term"].iloc[:top])
    sub = space.subspace([n for n in space.names if n in chosen])
    return sub, ranking, interaction_note(a, space, sorted(chosen))


def interaction_note(a: EffectsAnalysis, space: Space, chosen: list[str]) -> str | None:
    """A warning when the screening resolves a significant two-factor interaction (a
    resolution V fraction does) between factors the main-effect ranking left out: D:E at
    12.7 with D and E inert alone would otherwise vanish from the follow-up unseen. None
    when there is no such term, or the design cannot separate interactions (PB)."""
    two = a.effects[(a.effects["order"] == 2) & a.effects["significant"].astype(bool)]
    missed = [(str(t), float(e)) for t, e in zip(two["term"], two["effect"])
              if any(f not in chosen for f in str(t).split(":"))]
    if not missed:
        return None
    out = sorted({f for t, _ in missed for f in t.split(":") if f not in chosen},
                 key=lambda f: space.names.index(f) if f in space.names else len(space.names))
    terms = []
    for t, e in missed:
        alias = next((x for x in a.aliases if t in x.replace(" ", "").split("=")), None)
        terms.append(f"{t} ({e:+.4g}" + (f"; aliased: {alias}" if alias else "") + ")")
    return (f"significant two-factor interaction{'s' if len(missed) > 1 else ''} "
            f"{', '.join(terms)} involve{'s' if len(missed) == 1 else ''} {', '.join(out)}, "
            f"not among the top {len(chosen)} main effects: the follow-up cannot estimate "
            "it; raise --top or include those factors")


def holm(ranking: pd.DataFrame, lenth: Lenth | None, alpha: float) -> pd.DataFrame:
    """`ranking` (main effects with their ANOVA `p`) with `p_holm`, the p-values adjusted by
    Holm's step-down over all of them, and `significant` = p_holm < alpha.

    A screening tests every factor at once: at alpha 0.05 one of 20 inert factors passes
    by chance on average, and the follow-up would spend its runs on it. Holm keeps the
    family-wise error at alpha (Bonferroni's guarantee, uniformly more powerful). An effect
    the saturated model leaves without an ANOVA p gets Lenth's: t = effect / PSE on m/3
    df, the t Lenth's margin of error is built on."""
    import numpy as np
    from scipy import stats
    from statsmodels.stats.multitest import multipletests

    out = ranking.copy()
    p = out["p"].to_numpy(dtype=float) if "p" in out else np.full(len(out), np.nan)
    missing = ~np.isfinite(p)
    if missing.any() and lenth is not None and lenth.pse > 0:
        t = np.abs(out["effect"].to_numpy(dtype=float)) / lenth.pse
        p = np.where(missing, 2 * stats.t.sf(t, lenth.df), p)
        out["p"] = p
        out["basis"] = np.where(missing, "Lenth t", out.get("basis", "ANOVA"))
    tested = np.isfinite(p)
    adjusted = np.full(len(out), np.nan)
    if tested.any():
        adjusted[tested] = multipletests(p[tested], alpha=alpha, method="holm")[1]
    out["p_holm"] = adjusted
    out["significant"] = np.where(tested, adjusted < alpha, False).astype(bool)
    first = [c for c in ("term", "effect", "pct", "p", "p_holm", "significant") if c in out]
    return out[first + [c for c in out.columns if c not in first]]


def correction_text(ranking: pd.DataFrame, alpha: float = 0.05) -> str:
    """The line that says which correction chose the significant factors."""
    n = int(ranking["p_holm"].notna().sum()) if "p_holm" in ranking else 0
    bases = sorted({str(b) for b in ranking.get("basis", []) if b}) or ["ANOVA"]
    return (f"significance: {CORRECTION}-adjusted p-values (p_holm) over the {n} main "
            f"effects' {' and '.join(bases)} p-values, family-wise alpha {alpha:g}")


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
        return (f"no main effect is significant at family-wise alpha {alpha:g} ({CORRECTION}): "
                f"the top {top} are only "
                "the largest effects measured, not shown to matter (replicate the screening "
                "or give it more runs before following it up)")
    weak = ", ".join(str(t) for t in chosen.loc[~sig, "term"])
    n = int(sig.sum())
    return (f"only {n} of the top {top} main effects {'is' if n == 1 else 'are'} significant "
            f"at family-wise alpha {alpha:g} ({CORRECTION}); {weak} chosen by size alone")
