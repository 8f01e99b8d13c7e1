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
from ..errors import SimError
from .failures import (MAX_PASSES, FailureCounts, add_availability_counts, any_failures,
                       apply_failures, describe_counts, failure_starts, needs_settle,
                       window_rates_from_sums)
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
    """Simulate `n` requests block by block on the compiled engine; the report. Failures
    that need no settling are counted block by block into the same availability and
    failure windows the whole-run path reports; for those that do, `run_settled_stream`."""
    return _report(model, _stream_pass(model, n, None))


def run_settled_stream(model: ClusterModel, n: int) -> SimReport:
    """A closed loop with failure windows, streamed: `failures.settle`'s fixed point with
    each pass run block by block. Pass k routes every request by the window its start fell
    in on pass k - 1 (pass 1: the first window), until no request changes window; between
    passes only a start time and a window per request are kept (16 bytes, not the routes).
    Same passes, routes, service draws (keyed per request) and report as the whole-run
    `settle`."""
    begins = failure_starts(model.spec)
    p = _stream_pass(model, n, None)
    for k in range(1, MAX_PASSES + 1):
        new = np.searchsorted(begins, p.starts, side="right") - 1
        moved = int(np.sum(new != p.epochs))
        if moved == 0:
            model.extra["failures"].passes = k
            return _report(model, p)
        starts = p.starts
        del p           # the last pass's sums go before the next pass builds its own
        p = _stream_pass(model, n, starts)
    raise SimError(f"failure windows in a closed loop: {moved} requests still change window "
                   f"after {MAX_PASSES} simulations; use an open loop (workload.rate)")


@dataclasses.dataclass
class _Pass:
    """One streamed simulation: its sums, the engine's totals and (settling) each request's
    start time and the failure window it was routed by."""

    tally: Tally
    res: Any
    counts: FailureCounts | None
    closed: bool
    build: float
    cpu: float
    starts: np.ndarray | None
    epochs: np.ndarray | None


def _stream_pass(model: ClusterModel, n: int, starts: np.ndarray | None) -> _Pass:
    """Draw, route, feed and tally `n` requests block by block. A closed loop with failure
    windows (`needs_settle`) routes each request by `starts` (its start on the previous
    pass; None: the first window), draws service times keyed per request, and returns this
    pass's starts."""
    wl = model.spec.workload
    warm = min(int(wl.warmup * n), n - 1)
    closed = wl.rate is None
    clients = min(int(wl.clients or 1), n) if closed else None
    marks = window_marks(n, clients)
    core = engine.Stream(model.stations, n, clients=clients, warmup=warm, marks=marks)
    # Failures route each block alone: the report's availability and failure windows are
    # summed as blocks go.
    failing = any_failures(model.spec)
    settling = needs_settle(model.spec)
    tally = Tally(n, warm, marks, fail_starts=failure_starts(model.spec) if failing else None)
    counts = FailureCounts.zeros(tally.fcnt.shape[1]) if failing else None
    new_starts = np.zeros(n) if settling else None
    epochs = np.zeros(n, dtype=np.int64) if settling else None
    pend = _Pending()
    build = 0.0
    expo = model.spec.service_times == "exponential"
    for b, block in enumerate(iter_requests(model, n)):
        o = b * DRAW_BLOCK
        if settling and starts is not None:     # by the previous pass's start times
            block = apply_failures(model, block, starts=starts[o:o + len(block)], stream=b)
        pend.add(b, block)
        plan = model.extra.get("failures")
        if epochs is not None:
            epochs[o:o + len(block)] = plan.epoch
        if counts is not None:
            counts.add(block, plan.epoch, warm, offset=o)
        draws = None
        for a in range(0, len(block), FEED_CHUNK):
            t0 = time.perf_counter()
            e = min(a + FEED_CHUNK, len(block))
            req = slice_requests(block, a, e)
            if plan is not None:       # the block's failure plan, cut to these requests
                model.extra["failures"] = dataclasses.replace(plan, epoch=plan.epoch[a:e])
            routes = build_routes(model, req)
            if expo and settling:
                routes.demand *= keyed_exponentials(routes, wl.seed, o + a)
            elif expo:
                # The block's draws (as one call would make them), consumed in order.
                if draws is None:
                    draws = _BlockDraws(model, b)
                routes.demand *= draws.take(routes.demand.size)
            build += time.perf_counter() - t0
            done = core.feed(routes, arrivals=req.arrivals, think=req.think)
            del routes, req
            if new_starts is not None:
                new_starts[done[0]] = done[1]
            _tally(tally, pend, done, core.now, core.snap_times())
        if plan is not None:
            model.extra["failures"] = plan
    res = core.finish()
    tally.add(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), np.zeros(0, np.int8),
              np.zeros(0, np.int64), np.zeros(0, bool), res.sim_time, res.snap_t[:-1],
              final=True)
    return _Pass(tally, res, counts, closed, build, core.cpu, new_starts, epochs)


def _report(model: ClusterModel, p: _Pass) -> SimReport:
    """A streamed pass's report, with availability and failure windows when failing."""
    tally = p.tally
    report = tally.finish(model, p.res, p.closed, p.build, [])
    report.engine_cpu = p.cpu
    if p.counts is not None:
        add_availability_counts(report, p.counts)

        def rates(out: list[dict[str, Any]], epochs: list[int], window: dict[str, Any]) -> None:
            # Summed over the window's intervals; in a degenerate run (every arrival at
            # once) the whole-run path leaves out the last finishes, this does not.
            if tally.win is not None:
                window_rates_from_sums(out, epochs, window, tally.fcnt[tally.win].sum(axis=0),
                                       tally.flat[tally.win].sum(axis=0))

        describe_counts(model, report, model.extra["failures"], p.counts, p.closed, p.res,
                        rates)
    return report


def _tally(tally: Tally, pend: _Pending, done: Any, now: float, edges: np.ndarray) -> None:
    idx, start, finish = done
    op, size, ok = pend.take(idx)
    tally.add(idx, start, finish, op, size, ok, now, edges)


def keyed_exponentials(routes: Any, seed: int, first_request: int = 0) -> np.ndarray:
    """Exponential(1) draws per visit keyed by (request, visit's place in its route): a
    request's service times do not move when another request's route changes (which the
    closed-loop failure fixed point needs). A vectorised splitmix64 of the key.
    `first_request`: the run's index of the routes' first request (a streamed chunk)."""
    n_v = np.diff(routes.visit_ptr[routes.branch_ptr[routes.step_ptr]])
    first = np.repeat(routes.visit_ptr[routes.branch_ptr[routes.step_ptr[:-1]]], n_v)
    pos = np.arange(first.size) - first
    req_i = np.repeat(np.arange(first_request, first_request + n_v.size), n_v)
    with np.errstate(over="ignore"):
        z = (req_i.astype(np.uint64) << np.uint64(16)) + pos.astype(np.uint64) \
            + np.uint64(seed & 0xFFFFFFFFFFFFFFFF) * np.uint64(0x9E3779B97F4A7C15)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = ((z >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53
    return -np.log(u)
