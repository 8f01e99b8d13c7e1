"""Tuning: adaptive design sources behind the campaign's seam (screen -> importance ->
Optuna search -> confirmation), their results, and offline evaluation against measured
tables."""

from .strategies import STRATEGIES, Objective, TuneError, TuneSettings, make_strategy

__all__ = ["STRATEGIES", "Objective", "TuneError", "TuneSettings", "make_strategy"]
