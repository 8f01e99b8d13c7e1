"""Tuning: adaptive design sources behind the campaign's seam (screen -> importance ->
Optuna search -> confirmation), their results, and offline evaluation against measured
tables. Names load on first use (Optuna is imported only by a search that needs it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

_lazy_names, __getattr__, __dir__ = attach(__name__, {
    "STRATEGIES": ".strategies", "Objective": ".strategies", "TuneSettings": ".strategies",
    "make_strategy": ".strategies", "TuneError": "storlab.errors",
    "TuneSource": ".tune_source",
    "TuneResult": ".result", "result_from_campaign": ".result", "change_text": ".result",
    "race_lines": ".result",
    "TuneEvalResult": ".evaluate", "tune_eval": ".evaluate", "MEDIAN_RULE": ".evaluate",
    "tune": ".tuning", "confirm": ".tuning", "Tuning": ".tuning", "Confirmation": ".tuning",
    "TuneOutcome": ".tuning", "ConfirmOutcome": ".tuning",
})

__all__ = ["MEDIAN_RULE", "STRATEGIES", "Confirmation", "ConfirmOutcome", "Objective",
           "TuneError", "TuneEvalResult", "TuneOutcome", "TuneResult", "TuneSettings",
           "TuneSource", "Tuning", "change_text", "confirm", "make_strategy", "race_lines",
           "result_from_campaign", "tune", "tune_eval"]

if TYPE_CHECKING:  # the names above, for type checkers and readers; loaded lazily at run time
    from ..errors import TuneError
    from .evaluate import MEDIAN_RULE, TuneEvalResult, tune_eval
    from .result import TuneResult, change_text, race_lines, result_from_campaign
    from .strategies import STRATEGIES, Objective, TuneSettings, make_strategy
    from .tune_source import TuneSource
    from .tuning import (ConfirmOutcome, Confirmation, TuneOutcome, Tuning, confirm,
                         tune)
