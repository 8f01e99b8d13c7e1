"""Running a cluster model: draw the workload, build the routes, simulate, summarise.

Apart from the model, routes and summary because a closed loop run for a duration is sized
by the analytic throughput, and the analytic model imports those pieces."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .failures import add_availability, describe_failures, needs_settle, settle
from .model import ClusterModel, Requests, draw_requests
from .routes import build_routes
from .stream import block_service_draws, keyed_exponentials, run_settled_stream, run_stream
from .summary import SimReport, summarise, window_marks


def _n_requests(model: ClusterModel) -> int:
    wl = model.spec.workload
    if wl.requests is not None:
        return int(wl.requests)
    assert wl.duration is not None
    if wl.rate is not None:
        return max(2, int(round(wl.rate * wl.duration)))
    # Closed loop for a duration: the analytic throughput says how many requests fit.
    from .analytic import solve_mva
    x = solve_mva(model).throughput
    return max(2 * int(wl.clients or 1), int(math.ceil(x * wl.duration)))


def run_model(model: ClusterModel, *, backend: str = "rust", requests: int | None = None
              ) -> SimReport:
    """Draw the workload, build the routes, run the engine and summarise."""
    import time as _time

    from . import engine

    wl = model.spec.workload
    n = int(requests) if requests is not None else _n_requests(model)
    # Block by block, in flat memory (storlab.sim.stream); same result as below. A closed
    # loop with failure windows streams each pass of the settling fixed point (keeping one
    # start time and window per request between passes).
    if backend == "rust" and engine.compiled() and n >= 2:
        return run_settled_stream(model, n) if needs_settle(model.spec) else run_stream(model, n)
    t0 = _time.perf_counter()
    req = draw_requests(model, n)
    draw_wall = _time.perf_counter() - t0
    plan = model.extra.get("failures")
    settling = plan is not None and plan.provisional
    warm = min(int(wl.warmup * n), n - 1)
    notes: list[str] = []
    closed = wl.rate is None
    clients = min(int(wl.clients or 1), n) if closed else None
    kwargs: dict[str, Any] = {"warmup": warm, "marks": window_marks(n, clients)}
    if wl.rate is not None:
        kwargs["arrivals"] = req.arrivals
    else:
        kwargs["clients"] = clients
        kwargs["think"] = req.think
    walls = [0.0]

    def once(r: Requests) -> Any:
        t = _time.perf_counter()
        routes = build_routes(model, r)
        if model.spec.service_times == "exponential":
            routes.demand *= (keyed_exponentials(routes, wl.seed) if settling else
                              block_service_draws(model, routes))
        walls[0] += _time.perf_counter() - t
        try:
            return engine.simulate(model.stations, routes, backend=backend, **kwargs)
        except engine.EngineNotBuiltError:
            if not notes:
                notes.append("compiled engine missing: used the slow Python reference engine")
            return engine.simulate(model.stations, routes, backend="python", **kwargs)

    if settling:  # a closed loop with failure windows: routes by simulated start times
        req, res = settle(model, req, once)
    else:
        res = once(req)
    report = summarise(model, req, res, draw_wall + walls[0], notes)
    add_availability(report, req, warm)
    describe_failures(model, report, req, res)
    return report
