"""Estimate mixed read/write performance from minimal measurements: the f_rw capacity
model of Ra & Lee (MSST 2019), fitted per I/O size, with size mixes and intervals.
`measure` plans and runs the fio measurements (through the campaign loop); `quietdev`
makes a quiet device (zram, loop on tmpfs) to measure on."""

from __future__ import annotations

from .._lazy import attach

__all__, __getattr__, __dir__ = attach(__name__, {
    **{n: ".model" for n in (
        "DEFAULT_MIX", "MIXES", "Cell", "Prediction", "RWModel", "SizeFit", "fit_table",
        "mixed_checks", "parse_size_mix", "read_results", "size_label", "split_table")},
    "EstimateError": "storlab.errors", "QuietDeviceError": "storlab.errors",
    "MeasurePlan": ".measure", "MeasureResult": ".measure", "run_plan": ".measure",
    "QuietDevice": ".quietdev", "quiet_device": ".quietdev",
})
