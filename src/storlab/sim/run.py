"""Running a cluster model: draw the workload, build the routes, simulate, summarise.

Apart from the model, routes and summary because a closed loop run for a duration is sized
by the analytic throughput, and the analytic model imports those pieces."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .failures import add_availability
from .model import ClusterModel, draw_requests
from .routes import build_routes
from .summary import SimReport, summarise, window_marks


def _n_requests(model: ClusterModel) -> int:
    wl = model.spec.workload
    if wl.requests is not None:
        return int(wl.requests)
    assert wl.duration is not None
    if wl.rate is not None:
        return max(2, int(round(wl.rate * wl.duration)))
    # Closed loop for a duration: the analytic throughput says how many requests fit.
    from .analytic import analyse
    x = analyse(model).throughput
    return max(2 * int(wl.clients or 1), int(math.ceil(x * wl.duration)))


def run_model(model: ClusterModel, *, backend: str = "rust", requests: int | None = None
              ) -> SimReport:
    """Draw the workload, build the routes, run the engine and summarise."""
    import time as _time

    from . import engine

    wl = model.spec.workload
    n = int(requests) if requests is not None else _n_requests(model)
    # Block by block, in flat memory (storlab.sim.stream); same result as below. Not for
    # failure windows in a closed loop: their routes depend on simulated start times.
    timed = any(not f.whole_run for f in model.spec.failures)
    if backend == "rust" and engine.compiled() and not (timed and wl.rate is None):
        from .stream import run_stream
        report, avail = run_stream(model, n)
        if avail is not None:
            add_availability(report, avail, min(int(wl.warmup * n), n - 1))
        return report
    t0 = _time.perf_counter()
    req = draw_requests(model, n)
    routes = build_routes(model, req)
    if model.spec.service_times == "exponential":
        from .stream import block_service_draws
        routes.demand *= block_service_draws(model, routes)
    build_wall = _time.perf_counter() - t0
    warm = min(int(wl.warmup * n), n - 1)
    notes: list[str] = []
    kwargs: dict[str, Any] = {"warmup": warm, "marks": window_marks(n)}
    if wl.rate is not None:
        kwargs["arrivals"] = req.arrivals
    else:
        kwargs["clients"] = min(int(wl.clients or 1), n)
        kwargs["think"] = req.think
    try:
        res = engine.simulate(model.stations, routes, backend=backend, **kwargs)
    except engine.EngineNotBuiltError:
        notes.append("compiled engine missing: used the slow Python reference engine")
        res = engine.simulate(model.stations, routes, backend="python", **kwargs)
    report = summarise(model, req, res, build_wall, notes)
    add_availability(report, req, warm)
    return report
