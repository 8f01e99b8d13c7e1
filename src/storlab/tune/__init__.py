"""Tuning: adaptive design sources behind the campaign's seam (screen -> importance ->
Optuna search -> confirmation), their results, and offline evaluation against measured
tables. Names load on first use (Optuna is imported only by a search that needs it)."""

from __future__ import annotations

from .._lazy import attach

__all__, __getattr__, __dir__ = attach(__name__, {
    "STRATEGIES": ".strategies", "Objective": ".strategies", "TuneSettings": ".strategies",
    "make_strategy": ".strategies", "TuneError": "storlab.errors",
    "TuneSource": ".tune_source", "TuneResult": ".result", "result_from_campaign": ".result",
    "TuneEvalResult": ".evaluate", "tune_eval": ".evaluate",
    "tune": ".tuning", "confirm": ".tuning", "Tuning": ".tuning", "Confirmation": ".tuning",
    "TuneOutcome": ".tuning", "ConfirmOutcome": ".tuning",
})
