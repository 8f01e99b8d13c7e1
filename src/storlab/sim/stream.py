"""Running a cluster model in blocks, in memory that does not grow with the run.

A run is drawn (`model.iter_requests`), routed (`routes.build_routes`) and fed to the
compiled engine (`engine.Stream`) one block of DRAW_BLOCK requests at a time, and the
statistics are summed as requests finish (`summary.Tally`): at any moment only a block's
requests and routes, the requests in flight, and fixed-size sums are held. The result is
the one `engine.simulate` gives on the whole run's routes: same draws, same events, the
same report.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from . import engine
from .failures import (FailureCounts, add_availability_counts, any_failures, describe_counts,
                       failure_starts, window_rates_from_sums)
from .model import DRAW_BLOCK, ClusterModel, Requests, iter_requests
from .routes import slice_requests, build_routes
from .summary import SimReport, Tally, window_marks

#: Requests routed and fed to the engine at a time (a quarter of a draw block): bounds the
#: route builder's dense temporaries and how far the engine's window reaches.
FEED_CHUNK = DRAW_BLOCK // 4


def service_draws(model: ClusterModel, n_visits: int, block: int) -> np.ndarray:
    """Exponential service: the unit-mean factors of one block's visit demands (block 0
    draws exactly what the whole run drew before blocks)."""
    seed = model.spec.workload.seed
    rng = np.random.default_rng([seed, 1] if block == 0 else [seed, 1, block])
    return rng.exponential(1.0, n_visits)


def block_service_draws(model: ClusterModel, routes: engine.Routes) -> np.ndarray:
    """`service_draws` for routes of a whole run: per DRAW_BLOCK requests, the block's."""
    n = routes.n_requests
    cut = routes.visit_ptr[routes.branch_ptr[routes.step_ptr[np.r_[0:n:DRAW_BLOCK, n]]]]
    return np.concatenate([service_draws(model, int(cut[b + 1] - cut[b]), b)
                           for b in range(cut.size - 1)] or [np.zeros(0)])


class _BlockDraws:
    """A block's `service_draws`, handed out in order as its chunks are routed (drawn in
    pieces from one generator: numpy's exponential draws the same sequence whether asked
    for all at once or piece by piece)."""

    def __init__(self, model: ClusterModel, block: int) -> None:
        seed = model.spec.workload.seed
        self.rng = np.random.default_rng([seed, 1] if block == 0 else [seed, 1, block])

    def take(self, k: int) -> np.ndarray:
        return self.rng.exponential(1.0, k)


class _Pending:
    """Op, bytes and success of requests fed and not yet finished, by block."""

    def __init__(self) -> None:
        self.blocks: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray | None, int]] = {}

    def add(self, b: int, req: Requests) -> None:
        self.blocks[b] = (req.op, req.size, req.ok, len(req))

    def take(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Op, size, ok of the finished requests `idx`; forgets blocks all finished."""
        op = np.empty(idx.size, dtype=np.int8)
        size = np.empty(idx.size, dtype=np.int64)
        ok = np.ones(idx.size, dtype=bool)
        blk = idx // DRAW_BLOCK
        for b in np.unique(blk).tolist():
            sel = blk == b
            o, s, k, left = self.blocks[b]
            j = idx[sel] - b * DRAW_BLOCK
            op[sel], size[sel] = o[j], s[j]
            if k is not None:
                ok[sel] = k[j]
            left -= int(sel.sum())
            if left:
                self.blocks[b] = (o, s, k, left)
            else:
                del self.blocks[b]
        return op, size, ok


def run_stream(model: ClusterModel, n: int) -> SimReport:
    """Simulate `n` requests block by block on the compiled engine; the report. Runs whose
    failures need settling (`failures.needs_settle`) take `run.run_model`'s whole-run path;
    other failures are counted block by block into the same availability and failure
    windows the whole-run path reports."""
    wl = model.spec.workload
    warm = min(int(wl.warmup * n), n - 1)
    marks = window_marks(n)
    closed = wl.rate is None
    core = engine.Stream(model.stations, n, clients=min(int(wl.clients or 1), n) if closed
                         else None, warmup=warm, marks=marks)
    # Failures that need no settling (whole-run ones, or windows by arrival time) route each
    # block alone: the report's availability and failure windows are summed as blocks go.
    failing = any_failures(model.spec)
    tally = Tally(n, warm, marks, fail_starts=failure_starts(model.spec) if failing else None)
    counts = FailureCounts.zeros(tally.fcnt.shape[1]) if failing else None
    pend = _Pending()
    build = 0.0
    expo = model.spec.service_times == "exponential"
    for b, block in enumerate(iter_requests(model, n)):
        pend.add(b, block)
        plan = model.extra.get("failures")
        if counts is not None:
            counts.add(block, plan.epoch, warm, offset=b * DRAW_BLOCK)
        draws = None
        for a in range(0, len(block), FEED_CHUNK):
            t0 = time.perf_counter()
            e = min(a + FEED_CHUNK, len(block))
            req = slice_requests(block, a, e)
            if plan is not None:       # the block's failure plan, cut to these requests
                model.extra["failures"] = dataclasses.replace(plan, epoch=plan.epoch[a:e])
            routes = build_routes(model, req)
            if expo:
                # The block's draws (as one call would make them), consumed in order.
                if draws is None:
                    draws = _BlockDraws(model, b)
                routes.demand *= draws.take(routes.demand.size)
            build += time.perf_counter() - t0
            done = core.feed(routes, arrivals=req.arrivals, think=req.think)
            del routes, req
            _tally(tally, pend, done, core.now, core.snap_times())
        if plan is not None:
            model.extra["failures"] = plan
    res = core.finish()
    tally.add(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), np.zeros(0, np.int8),
              np.zeros(0, np.int64), np.zeros(0, bool), res.sim_time, res.snap_t[:-1],
              final=True)
    report = tally.finish(model, res, closed, build, [])
    report.engine_cpu = core.cpu
    if counts is not None:
        add_availability_counts(report, counts)

        def rates(out: list[dict[str, Any]], epochs: list[int], window: dict[str, Any]) -> None:
            # Summed over the window's intervals; in a degenerate run (every arrival at
            # once) the whole-run path leaves out the last finishes, this does not.
            if tally.win is not None:
                window_rates_from_sums(out, epochs, window, tally.fcnt[tally.win].sum(axis=0),
                                       tally.flat[tally.win].sum(axis=0))

        describe_counts(model, report, model.extra["failures"], counts, closed, res, rates)
    return report


def _tally(tally: Tally, pend: _Pending, done: Any, now: float, edges: np.ndarray) -> None:
    idx, start, finish = done
    op, size, ok = pend.take(idx)
    tally.add(idx, start, finish, op, size, ok, now, edges)
