"""Estimate mixed read/write performance from minimal measurements: the f_rw capacity
model of Ra & Lee (MSST 2019), fitted per I/O size, with size mixes and intervals."""

from .model import (
    Cell, EstimateError, Prediction, RWModel, SizeFit, fit_table, parse_mix, read_results,
    size_label,
)

__all__ = ["Cell", "EstimateError", "Prediction", "RWModel", "SizeFit", "fit_table",
           "parse_mix", "read_results", "size_label"]
