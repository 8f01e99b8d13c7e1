"""The Swift cluster simulator: a cluster file's schema, loading and overrides in `spec`,
the built model and its drawn requests in `model`, each request's route in `routes`, the
steady-state summary in `summary`, a whole run in `run` (`stream` block by block), the
event engine in `engine`, the analytic (MVA) model in `analytic`, sweeps and calibration.

    import storlab.sim as sim
    rep = sim.simulate("examples/sim/small.yaml", clients=128)   # a SimReport
    rep.metrics(); rep.table()

`calibrate_cluster` is `calibrate.calibrate` (a package attribute named like its module
would be replaced by the module once the module is imported).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._lazy import attach

_all, __getattr__, __dir__ = attach(__name__, {
    "SimError": "storlab.errors",
    "ClusterSpec": ".spec", "load_cluster": ".spec", "load_raw": ".spec",
    "parse_cluster": ".spec", "apply_overrides": ".spec",
    "ClusterModel": ".model", "build_model": ".model",
    "SimReport": ".summary", "run_model": ".run",
    "solve_mva": ".analytic", "AnalyticResult": ".analytic", "ACCURACY": ".analytic",
    "refuse_analytic": ".failures",
    "SweepResult": ".sweep", "parse_sweep": ".sweep",
    "CalibrationResult": ".calibrate", "calibrate_cluster": ".calibrate:calibrate",
    "read_measurements": ".calibrate",
    "Ring": ".ring", "DeviceSpec": ".devices", "resolve_device": ".devices",
})
__all__ = ["ACCURACY", "AnalyticResult", "CalibrationResult", "ClusterModel", "ClusterSpec",
           "DeviceSpec", "Ring", "SimError", "SimReport", "SweepResult", "apply_overrides",
           "build_model", "calibrate_cluster", "load_cluster", "load_raw", "parse_cluster",
           "parse_sweep", "read_measurements", "refuse_analytic", "resolve_device", "run_model",
           "simulate", "solve_mva"]

if TYPE_CHECKING:  # the names above, for type checkers and readers; loaded lazily at run time
    from ..errors import SimError
    from .analytic import ACCURACY, AnalyticResult, solve_mva
    from .calibrate import CalibrationResult, read_measurements
    from .calibrate import calibrate as calibrate_cluster
    from .devices import DeviceSpec, resolve_device
    from .failures import refuse_analytic
    from .model import ClusterModel, build_model
    from .ring import Ring
    from .run import run_model
    from .spec import ClusterSpec, apply_overrides, load_cluster, load_raw, parse_cluster
    from .summary import SimReport
    from .sweep import SweepResult, parse_sweep


def simulate(cluster: str | Path | dict[str, Any], *, analytic: bool = False,
             backend: str = "rust", **overrides: Any) -> Any:
    """Simulate a cluster file (path) or dict with `overrides` as `--set` gives them
    (`clients=128`, `object_size="64KiB"`, `storage.disks.count=6` as a dict key): a
    SimReport from the event engine, or the AnalyticResult of the MVA model."""
    from .model import build_model
    from .run import run_model
    from .spec import apply_overrides, load_raw, parse_cluster

    src = str(cluster) if isinstance(cluster, (str, Path)) else "cluster"
    raw = load_raw(cluster) if isinstance(cluster, (str, Path)) else dict(cluster)
    if overrides:
        raw = apply_overrides(raw, overrides, source=src)
    model = build_model(parse_cluster(raw, src))
    if analytic:
        from .analytic import solve_mva

        return solve_mva(model)
    return run_model(model, backend=backend)
