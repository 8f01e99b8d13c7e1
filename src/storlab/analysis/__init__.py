"""Analyses of a results table, one module per method (as SALib's `analyze/`): `effects`
(effects, ANOVA, Lenth), `importance` (Carver's PI/CPI greedy selection), `coverage`
(how much of a system's behaviour a benchmark covers), `compare` and `importance_eval`.

Each returns a small result object with `.table()` and `.plot()`. The functions named like
their module are reached through it (`storlab.analysis.importance.importance`) or from the
top level (`storlab.importance`, `storlab.coverage`): a package attribute named like a
submodule would be replaced by the module as soon as the module is imported."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

_lazy_names, __getattr__, __dir__ = attach(__name__, {
    "analyze": ".effects", "EffectsAnalysis": ".effects",
    "infer_codings": ".effects", "lenth": ".effects",
    "ImportanceResult": ".importance", "StopRule": ".importance",
    "CoverageResult": ".coverage",
    "Comparison": ".compare",
    "EvalResult": ".importance_eval", "evaluate": ".importance_eval",
})

__all__ = ["Comparison", "CoverageResult", "EffectsAnalysis", "EvalResult", "ImportanceResult",
           "StopRule", "analyze", "evaluate", "infer_codings", "lenth"]

if TYPE_CHECKING:  # the names above, for type checkers and readers; loaded lazily at run time
    from .compare import Comparison
    from .coverage import CoverageResult
    from .effects import EffectsAnalysis, analyze, infer_codings, lenth
    from .importance import ImportanceResult, StopRule
    from .importance_eval import EvalResult, evaluate
