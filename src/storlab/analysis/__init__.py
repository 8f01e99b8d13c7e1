"""Analyses of a results table, one module per method (as SALib's `analyze/`): `effects`
(effects, ANOVA, Lenth), `importance` (Carver's PI/CPI greedy selection), `coverage`
(how much of a system's behaviour a benchmark covers), `compare`, `importance_eval` and
`followup` (a follow-up space from a screening's significant factors).

Each returns a small result object with `.table()` and `.plot()`. A function named like its
module is reached through the module (`storlab.analysis.importance.importance`), from the
top level (`storlab.importance`, `storlab.coverage`) or here under another name
(`importance_of`, `coverage_of`, `compare_methods`): a package attribute named like a
submodule would be replaced by the module as soon as the module is imported.

Which columns are measurements rather than settings is the runners' knowledge, declared per
runner in `storlab.metrics`: an analysis that reads the parameters off a bare table asks it
(`is_metric`; the CLI and the report pass `storlab.campaign.runners.is_metric`, the same
answer), and a caller may pass its own test."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

_lazy_names, __getattr__, __dir__ = attach(__name__, {
    "analyze": ".effects", "EffectsAnalysis": ".effects",
    "infer_codings": ".effects", "lenth": ".effects",
    "ImportanceResult": ".importance", "StopRule": ".importance",
    "importance_of": ".importance:importance", "importance_csv": ".importance",
    "CoverageResult": ".coverage", "coverage_of": ".coverage:coverage",
    "MethodComparison": ".compare", "compare_methods": ".compare:compare",
    "EvalResult": ".importance_eval", "evaluate": ".importance_eval",
    "CORRECTION": ".followup", "correction_text": ".followup", "follow_up": ".followup",
    "follow_up_note": ".followup",
})

__all__ = ["CORRECTION", "CoverageResult", "EffectsAnalysis", "EvalResult", "ImportanceResult",
           "MethodComparison", "StopRule", "analyze", "compare_methods", "correction_text",
           "coverage_of", "evaluate", "follow_up", "follow_up_note", "importance_csv",
           "importance_of", "infer_codings", "lenth"]

if TYPE_CHECKING:  # the names above, for type checkers and readers; loaded lazily at run time
    from .compare import MethodComparison
    from .compare import compare as compare_methods
    from .coverage import CoverageResult
    from .coverage import coverage as coverage_of
    from .effects import EffectsAnalysis, analyze, infer_codings, lenth
    from .followup import CORRECTION, correction_text, follow_up, follow_up_note
    from .importance import ImportanceResult, StopRule, importance_csv
    from .importance import importance as importance_of
    from .importance_eval import EvalResult, evaluate
