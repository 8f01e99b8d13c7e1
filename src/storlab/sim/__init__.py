"""The Swift cluster simulator: a cluster file (schema, model, routes) in `cluster`, the
event engine in `engine`, the analytic (MVA) model in `analytic`, sweeps and calibration.

    import storlab.sim as sim
    rep = sim.simulate("examples/sim/small.yaml", clients=128)   # a SimReport
    rep.metrics(); rep.table()
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._lazy import attach

_all, __getattr__, __dir__ = attach(__name__, {
    "SimError": "storlab.errors", "ClusterSpec": ".cluster", "ClusterModel": ".cluster",
    "SimReport": ".cluster", "load_cluster": ".cluster", "parse_cluster": ".cluster",
    "apply_overrides": ".cluster", "build_model": ".cluster", "run_model": ".cluster",
    "solve_mva": ".analytic", "AnalyticResult": ".analytic",
    "SweepResult": ".sweep",
    "CalibrationResult": ".calibrate",
    "Ring": ".ring", "DeviceSpec": ".devices", "resolve_device": ".devices",
})
__all__ = ["AnalyticResult", "CalibrationResult", "ClusterModel", "ClusterSpec", "DeviceSpec",
           "Ring", "SimError", "SimReport", "SweepResult", "apply_overrides", "build_model",
           "load_cluster", "parse_cluster", "resolve_device", "run_model", "simulate", "solve_mva"]

if TYPE_CHECKING:  # the names above, for type checkers and readers; loaded lazily at run time
    from ..errors import SimError
    from .analytic import AnalyticResult, solve_mva
    from .calibrate import CalibrationResult
    from .cluster import (ClusterModel, ClusterSpec, SimReport, apply_overrides, build_model,
                          load_cluster, parse_cluster, run_model)
    from .devices import DeviceSpec, resolve_device
    from .ring import Ring
    from .sweep import SweepResult


def simulate(cluster: str | Path | dict[str, Any], *, analytic: bool = False,
             backend: str = "rust", **overrides: Any) -> Any:
    """Simulate a cluster file (path) or dict with `overrides` as `--set` gives them
    (`clients=128`, `object_size="64KiB"`, `storage.disks.count=6` as a dict key): a
    SimReport from the event engine, or the AnalyticResult of the MVA model."""
    from .cluster import apply_overrides, build_model, load_raw, parse_cluster, run_model

    src = str(cluster) if isinstance(cluster, (str, Path)) else "cluster"
    raw = load_raw(cluster) if isinstance(cluster, (str, Path)) else dict(cluster)
    if overrides:
        raw = apply_overrides(raw, overrides, source=src)
    model = build_model(parse_cluster(raw, src))
    if analytic:
        from .analytic import solve_mva

        return solve_mva(model)
    return run_model(model, backend=backend)
