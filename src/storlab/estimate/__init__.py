"""Estimate mixed read/write performance from minimal measurements: the f_rw capacity
model of Ra & Lee (MSST 2019), fitted per I/O size, with size mixes and intervals."""

from .model import (
    DEFAULT_MIX, MIXES, Cell, EstimateError, Prediction, RWModel, SizeFit, fit_table,
    mixed_checks, parse_mix, read_results, size_label, split_table,
)

__all__ = ["DEFAULT_MIX", "MIXES", "Cell", "EstimateError", "Prediction", "RWModel", "SizeFit",
           "fit_table", "mixed_checks", "parse_mix", "read_results", "size_label",
           "split_table"]
