"""Generic discrete-event engine: executes pre-built request routes over stations.

The model (which stations a request visits and for how long) is built by the caller,
vectorised with numpy; this module only decides *when* things happen. A route is
a sequence of steps; a step forks into branches (e.g. one per replica) and is done
when ``quorum`` of them finish; a branch is a sequence of visits to stations.

Stations are FCFS with ``c`` identical servers, processor sharing (PS) with ``c``
servers, where each of ``n`` jobs present is served at rate ``min(1, c/n)``, or HOLD:
a pool of ``c`` tokens (e.g. a server's worker processes) held across several visits.
A visit to a HOLD station (its demand must be 0) takes one token, waiting FIFO when none
is free, and the branch keeps it until the branch ends (its last visit completes); then
the token passes to the next waiter at that same instant. A branch may hold tokens of
several pools; a run whose branches wait for tokens that can never come free (pools
taken in opposite orders, more tokens than a pool has) raises ``ValueError``. For a HOLD
station the statistics read: ``busy`` = tokens in use integrated over time, ``area`` =
holders + waiters, ``completions`` = releases, ``residence`` = from the arrival at the
pool to the release; so utilisation and Little's law keep their meaning.

There is no random number generator in the engine: all randomness lives in the
routes, arrival times and think times the caller builds, so the same seed gives
the same result exactly. The compiled core (``storlab_engine``, Rust) is the
default backend; ``backend="python"`` runs a small reference implementation of the
same semantics (same event order, same floating-point operations, identical results).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import EngineNotBuiltError  # sim.run catches engine.EngineNotBuiltError

FCFS, PS, HOLD = 0, 1, 2

__all__ = [
    "FCFS",
    "PS",
    "HOLD",
    "Stations",
    "Routes",
    "SimResult",
    "simulate",
    "linear_routes",
    "EngineNotBuiltError",
    "Stream",
    "compiled",
]


@dataclass
class Stations:
    """One entry per station: discipline and number of servers."""

    kind: np.ndarray  # int8: FCFS, PS or HOLD
    servers: np.ndarray  # int32 >= 1 (servers, or tokens for HOLD)
    names: list[str] | None = None

    def __len__(self) -> int:
        return len(self.kind)


@dataclass
class Routes:
    """Concrete routes of all requests, flattened CSR-style.

    Request ``i`` is steps ``step_ptr[i]:step_ptr[i+1]``; step ``s`` is branches
    ``branch_ptr[s]:branch_ptr[s+1]`` and completes when ``quorum[s]`` of them have
    finished (the others go on in the background); branch ``b`` is visits
    ``visit_ptr[b]:visit_ptr[b+1]``, done one after another; visit ``v`` asks
    ``demand[v]`` seconds of work (at rate 1) from station ``station[v]``.
    """

    step_ptr: np.ndarray  # int64, n_requests + 1
    branch_ptr: np.ndarray  # int64, n_steps + 1
    quorum: np.ndarray  # int32, n_steps
    visit_ptr: np.ndarray  # int64, n_branches + 1
    station: np.ndarray  # int32, n_visits
    demand: np.ndarray  # float64, n_visits
    op: np.ndarray | None = None  # int8 per request: operation class

    @property
    def n_requests(self) -> int:
        return len(self.step_ptr) - 1


@dataclass
class SimResult:
    """Per-request times and per-station integrals of one run.

    Station integrals (``busy``, ``area``, ``residence``) and ``completions`` cover
    ``[stats_start, sim_time]``, where ``stats_start`` is the arrival time of request
    ``warmup`` (0 when there is no warm-up); request statistics skip the first
    ``warmup`` requests.
    """

    start: np.ndarray  # float64 per request: arrival time
    finish: np.ndarray  # float64 per request: when its last step reached quorum
    op: np.ndarray | None  # int8 per request, as given in the routes
    busy: np.ndarray  # float64 per station: integral of busy servers over time
    area: np.ndarray  # float64 per station: integral of the number present
    completions: np.ndarray  # int64 per station: visits completed (HOLD: tokens released)
    residence: np.ndarray  # float64 per station: summed time of completed visits
    servers: np.ndarray  # int32 per station (copied from Stations, for utilisation)
    events: int  # events processed (arrivals, visit completions, HOLD token grants)
    sim_time: float  # time of the last event
    wall: float  # wall-clock seconds spent in simulate()
    warmup: int = 0
    stats_start: float = 0.0
    names: list[str] | None = field(default=None, repr=False)
    #: Snapshots asked with ``marks=``: the time of each marked arrival and every station's
    #: busy and area integrals from t = 0 up to it ([marks, stations]); differences of two
    #: rows give any interval's statistics, unaffected by the warm-up reset. A last row is
    #: added at the end of the run (``sim_time``).
    snap_t: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    snap_busy: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    snap_area: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)

    def _mask(self, op: int | None) -> np.ndarray:
        m = np.zeros(len(self.start), dtype=bool)
        m[self.warmup :] = True
        if op is not None:
            if self.op is None:
                raise ValueError("these routes carry no op classes")
            m &= self.op == op
        return m

    @property
    def window(self) -> float:
        """Length of the measurement window for station statistics."""
        return self.sim_time - self.stats_start

    def latency(self, op: int | None = None) -> np.ndarray:
        """Response times of the requests after warm-up (optionally of one op class)."""
        m = self._mask(op)
        return self.finish[m] - self.start[m]

    def throughput(self, op: int | None = None) -> float:
        """Completed requests per second over [stats_start, last counted finish]."""
        m = self._mask(op)
        if not m.any():
            return 0.0
        span = float(self.finish[self._mask(None)].max()) - self.stats_start
        return float(m.sum()) / span if span > 0 else float("inf")

    def utilisation(self) -> np.ndarray:
        """Per station: mean fraction of servers busy over the window."""
        return self.busy / (self.servers * self.window) if self.window > 0 else np.zeros_like(self.busy)

    def mean_in_system(self) -> np.ndarray:
        """Per station: time-average number of visits present (queued or in service)."""
        return self.area / self.window if self.window > 0 else np.zeros_like(self.area)

    def little_gap(self) -> np.ndarray:
        """Per station: relative gap between the two sides of Little's law, L*T vs sum of W.

        ``area`` (time-integral of the number present) must equal ``residence`` (summed
        visit times) when the window starts and ends empty; a warm-up cut leaves a small
        boundary term. A check on the engine's bookkeeping.
        """
        return np.abs(self.area - self.residence) / np.maximum(np.maximum(self.area, self.residence), 1e-300)

    def response_time(self) -> np.ndarray:
        """Per station: mean time a visit spends there (queue + service)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.completions > 0, self.residence / np.maximum(self.completions, 1), np.nan)


def linear_routes(station: np.ndarray, demand: np.ndarray, op: np.ndarray | None = None) -> Routes:
    """Routes where request ``i`` visits ``station[i, k]`` for ``demand[i, k]``, k in order.

    One step with one branch per request; a handy shape for tests and simple models.
    """
    station = np.atleast_2d(np.asarray(station, dtype=np.int32))
    demand = np.atleast_2d(np.asarray(demand, dtype=np.float64))
    if station.shape != demand.shape:
        raise ValueError(f"station shape {station.shape} != demand shape {demand.shape}")
    n, k = station.shape
    ptr = np.arange(n + 1, dtype=np.int64)
    return Routes(
        step_ptr=ptr,
        branch_ptr=ptr.copy(),
        quorum=np.ones(n, dtype=np.int32),
        visit_ptr=np.arange(n + 1, dtype=np.int64) * k,
        station=station.ravel(),
        demand=demand.ravel(),
        op=None if op is None else np.asarray(op, dtype=np.int8),
    )


def _check_ptr(name: str, ptr: np.ndarray, n_items: int) -> None:
    if len(ptr) < 1 or ptr[0] != 0 or ptr[-1] != n_items:
        raise ValueError(f"routes.{name} must start at 0 and end at {n_items}")
    if len(ptr) > 1 and np.any(np.diff(ptr) < 0):
        raise ValueError(f"routes.{name} must be non-decreasing")


def _prepare(
    stations: Stations,
    routes: Routes,
    arrivals: np.ndarray | None,
    clients: int | None,
    think: np.ndarray | float,
    warmup: int,
    marks: np.ndarray | None = None,
) -> dict:
    """Validate inputs (vectorised) and convert them to the dtypes both backends use."""
    kind = np.ascontiguousarray(stations.kind, dtype=np.int8)
    servers = np.ascontiguousarray(stations.servers, dtype=np.int32)
    if kind.ndim != 1 or servers.shape != kind.shape:
        raise ValueError("stations.kind and stations.servers must be 1-D of equal length")
    if np.any((kind != FCFS) & (kind != PS) & (kind != HOLD)):
        raise ValueError("stations.kind must be FCFS (0), PS (1) or HOLD (2)")
    if np.any(servers < 1):
        raise ValueError("stations.servers must be >= 1")
    n_st = len(kind)

    step_ptr = np.ascontiguousarray(routes.step_ptr, dtype=np.int64)
    branch_ptr = np.ascontiguousarray(routes.branch_ptr, dtype=np.int64)
    quorum = np.ascontiguousarray(routes.quorum, dtype=np.int32)
    visit_ptr = np.ascontiguousarray(routes.visit_ptr, dtype=np.int64)
    station = np.ascontiguousarray(routes.station, dtype=np.int32)
    demand = np.ascontiguousarray(routes.demand, dtype=np.float64)
    n_steps, n_branches, n_visits = len(branch_ptr) - 1, len(visit_ptr) - 1, len(station)
    n_req = len(step_ptr) - 1
    _check_ptr("step_ptr", step_ptr, n_steps)
    _check_ptr("branch_ptr", branch_ptr, n_branches)
    _check_ptr("visit_ptr", visit_ptr, n_visits)
    if len(quorum) != n_steps:
        raise ValueError(f"routes.quorum has {len(quorum)} entries, expected {n_steps} (one per step)")
    if np.any(quorum < 0) or np.any(quorum > np.diff(branch_ptr)):
        raise ValueError("routes.quorum must be between 0 and the step's number of branches")
    if len(demand) != n_visits:
        raise ValueError("routes.demand and routes.station must have equal length")
    if n_visits and (station.min() < 0 or station.max() >= n_st):
        raise ValueError(f"routes.station must index the {n_st} stations")
    if not np.all(np.isfinite(demand)) or np.any(demand < 0):
        raise ValueError("routes.demand must be finite and >= 0")
    # A HOLD visit only takes a token; work is done at the stations visited while holding it.
    if n_visits and np.any(kind == HOLD) and np.any(demand[kind[station] == HOLD] != 0):
        raise ValueError("routes.demand must be 0 on visits to HOLD stations")
    op = None if routes.op is None else np.asarray(routes.op, dtype=np.int8)
    if op is not None and len(op) != n_req:
        raise ValueError(f"routes.op has {len(op)} entries, expected {n_req}")

    if (arrivals is None) == (clients is None):
        raise ValueError("give exactly one of arrivals= (open loop) or clients= (closed loop)")
    if arrivals is not None:
        arrivals = np.ascontiguousarray(arrivals, dtype=np.float64)
        if arrivals.shape != (n_req,):
            raise ValueError(f"arrivals must have one time per request ({n_req})")
        if not np.all(np.isfinite(arrivals)) or (n_req and arrivals[0] < 0):
            raise ValueError("arrivals must be finite and >= 0")
        if np.any(np.diff(arrivals) < 0):
            raise ValueError("arrivals must be sorted")
        n_clients = -1
    else:
        n_clients = int(clients)  # type: ignore[arg-type]
        if n_clients < 1:
            raise ValueError("clients must be >= 1")
    think_arr = np.ascontiguousarray(np.broadcast_to(np.asarray(think, dtype=np.float64), (n_req,)))
    if not np.all(np.isfinite(think_arr)) or np.any(think_arr < 0):
        raise ValueError("think times must be finite and >= 0")
    warmup = int(warmup)
    if warmup < 0 or (n_req and warmup >= n_req):
        raise ValueError(f"warmup must be in [0, {max(n_req - 1, 0)}]")
    marks_arr = np.ascontiguousarray(np.zeros(0) if marks is None else marks, dtype=np.int64)
    if marks_arr.ndim != 1 or np.any(np.diff(marks_arr) <= 0) or (
            marks_arr.size and (marks_arr[0] < 0 or marks_arr[-1] >= max(n_req, 1))):
        raise ValueError(f"marks must be increasing arrival counts in [0, {max(n_req - 1, 0)}]")
    return dict(
        kind=kind,
        servers=servers,
        step_ptr=step_ptr,
        branch_ptr=branch_ptr,
        quorum=quorum,
        visit_ptr=visit_ptr,
        station=station,
        demand=demand,
        arrivals=arrivals,
        clients=n_clients,
        think=think_arr,
        warmup=warmup,
        op=op,
        marks=marks_arr,
    )


def _rust_core():
    try:
        import storlab_engine  # type: ignore[import-not-found]
    except ImportError as exc:  # pragma: no cover - depends on the build
        raise EngineNotBuiltError(
            "storlab_engine is not built: run `make` (or `.venv/bin/pip install ./engine`), "
            "or pass backend='python' for the slow reference engine"
        ) from exc
    return storlab_engine


def simulate(
    stations: Stations,
    routes: Routes,
    *,
    arrivals: np.ndarray | None = None,
    clients: int | None = None,
    think: np.ndarray | float = 0.0,
    warmup: int = 0,
    marks: np.ndarray | None = None,
    backend: str = "rust",
) -> SimResult:
    """Run the routes over the stations; see the module docstring for the semantics.

    Open loop: ``arrivals[i]`` (sorted) is request ``i``'s arrival time. Closed loop:
    ``clients`` clients; client ``j`` issues request ``j`` at ``think[j]``; each
    completion issues the next unissued request ``k`` after ``think[k]`` seconds.
    ``marks``: arrival counts (0-based, increasing) at which every station's integrals are
    snapshotted (``SimResult.snap_*``), for steady-state windows and time series.
    """
    t0 = time.perf_counter()
    p = _prepare(stations, routes, arrivals, clients, think, warmup, marks)
    args = (
        p["kind"],
        p["servers"],
        p["step_ptr"],
        p["branch_ptr"],
        p["quorum"],
        p["visit_ptr"],
        p["station"],
        p["demand"],
        p["arrivals"] if p["arrivals"] is not None else np.zeros(0),
        p["clients"],
        p["think"],
        p["warmup"],
        p["marks"],
    )
    if backend == "rust":
        out = _rust_core().simulate(*args)
    elif backend == "python":
        from storlab.sim._pyengine import simulate_core

        out = simulate_core(*args)
    else:
        raise ValueError(f"backend must be 'rust' or 'python', not {backend!r}")
    (start, finish, busy, area, completions, residence, events, sim_time, stats_start,
     snap_t, snap_busy, snap_area) = out
    n_snap, n_st = len(snap_t), len(p["kind"])
    return SimResult(
        start=np.asarray(start),
        finish=np.asarray(finish),
        op=p["op"],
        busy=np.asarray(busy),
        area=np.asarray(area),
        completions=np.asarray(completions, dtype=np.int64),
        residence=np.asarray(residence),
        servers=p["servers"],
        events=int(events),
        sim_time=float(sim_time),
        wall=time.perf_counter() - t0,
        warmup=p["warmup"],
        stats_start=float(stats_start),
        names=stations.names,
        snap_t=np.asarray(snap_t),
        snap_busy=np.asarray(snap_busy).reshape(n_snap, n_st),
        snap_area=np.asarray(snap_area).reshape(n_snap, n_st),
    )


class Stream:
    """A run fed its routes in chunks (compiled core only), for runs too long to hold: the
    engine keeps its state between chunks and holds only the requests in flight, and the
    result is the same as simulating the joined routes in one call, whatever the chunking.

    ``Stream(stations, n_requests, clients=.. | open_loop=True, warmup=, marks=)``, then
    ``feed(routes, arrivals=, think=)`` for each chunk of requests in order (routes with
    chunk-local offsets, as built), which runs as far as the requests fed allow and returns
    the requests finished meanwhile as (index, arrival, finish) arrays; then ``finish()``,
    a ``SimResult`` without per-request arrays (they were handed out by ``feed``).
    """

    def __init__(self, stations: Stations, n_requests: int, *, clients: int | None = None,
                 warmup: int = 0, marks: np.ndarray | None = None) -> None:
        self.t0 = time.perf_counter()
        self.kind = np.ascontiguousarray(stations.kind, dtype=np.int8)
        self.servers = np.ascontiguousarray(stations.servers, dtype=np.int32)
        self.names = stations.names
        self.n = int(n_requests)
        self.warmup = int(warmup)
        if clients is not None and int(clients) < 1:
            raise ValueError("clients must be >= 1")
        if self.warmup < 0 or (self.n and self.warmup >= self.n):
            raise ValueError(f"warmup must be in [0, {max(self.n - 1, 0)}]")
        self.closed = clients is not None
        m = np.ascontiguousarray(np.zeros(0) if marks is None else marks, dtype=np.int64)
        if m.ndim != 1 or np.any(np.diff(m) <= 0) or (
                m.size and (m[0] < 0 or m[-1] >= max(self.n, 1))):
            raise ValueError(f"marks must be increasing arrival counts in [0, {max(self.n - 1, 0)}]")
        self.core = _rust_core().Stream(self.kind, self.servers, int(clients) if self.closed else -1,
                                        self.warmup, m, self.n)
        self.fed = 0
        self.last_arrival = 0.0
        self.wall = time.perf_counter() - self.t0    # seconds spent in the engine
        self.cpu = 0.0                                 # CPU seconds spent in feed/finish

    @property
    def now(self) -> float:
        """Simulated time of the last event processed."""
        return float(self.core.now)

    @property
    def held_requests(self) -> int:
        """Requests the engine still holds (fed, and not done with)."""
        return int(self.core.held_requests)

    def snap_times(self) -> np.ndarray:
        """Times of the marked arrivals reached so far."""
        return np.asarray(self.core.snap_times)

    def feed(self, routes: Routes, *, arrivals: np.ndarray | None = None,
             think: np.ndarray | float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Add the next chunk of requests; (index, arrival, finish) of those finished."""
        t0, c0 = time.perf_counter(), time.process_time()
        n = routes.n_requests
        if self.closed == (arrivals is not None):
            raise ValueError("give arrivals= in open loop (no clients=) and only then")
        if arrivals is not None:
            arrivals = np.ascontiguousarray(arrivals, dtype=np.float64)
            if arrivals.shape != (n,) or not np.all(np.isfinite(arrivals)) or (
                    n and arrivals[0] < (self.last_arrival if self.fed else 0.0)) or np.any(
                    np.diff(arrivals) < 0):
                raise ValueError("arrivals must be finite, >= 0, sorted across chunks, "
                                 "one per request")
            if n:
                self.last_arrival = float(arrivals[-1])
        think_arr = np.ascontiguousarray(np.broadcast_to(np.asarray(think, dtype=np.float64), (n,)))
        if not np.all(np.isfinite(think_arr)) or np.any(think_arr < 0):
            raise ValueError("think times must be finite and >= 0")
        demand = np.ascontiguousarray(routes.demand, dtype=np.float64)
        station = np.ascontiguousarray(routes.station, dtype=np.int32)
        if not np.all(np.isfinite(demand)) or np.any(demand < 0):
            raise ValueError("routes.demand must be finite and >= 0")
        if station.size and (station.min() < 0 or station.max() >= self.kind.size):
            raise ValueError(f"routes.station must index the {self.kind.size} stations")
        if station.size and np.any(demand[self.kind[station] == HOLD] != 0):
            raise ValueError("routes.demand must be 0 on visits to HOLD stations")
        quorum = np.ascontiguousarray(routes.quorum, dtype=np.int32)
        branch_ptr = np.ascontiguousarray(routes.branch_ptr, dtype=np.int64)
        if np.any(quorum < 0) or np.any(quorum > np.diff(branch_ptr)):
            raise ValueError("routes.quorum must be between 0 and the step's number of branches")
        out = self.core.feed(np.ascontiguousarray(routes.step_ptr, dtype=np.int64), branch_ptr,
                             quorum, np.ascontiguousarray(routes.visit_ptr, dtype=np.int64),
                             station, demand,
                             arrivals if arrivals is not None else np.zeros(0), think_arr)
        self.fed += n
        self.wall += time.perf_counter() - t0
        self.cpu += time.process_time() - c0
        return np.asarray(out[0]), np.asarray(out[1]), np.asarray(out[2])

    def finish(self) -> SimResult:
        """After the last chunk: the stations' integrals and snapshots (``start`` and
        ``finish`` are empty: ``feed`` returned them; ``wall``: time spent in the engine)."""
        t0 = time.perf_counter()
        (busy, area, completions, residence, events, sim_time, stats_start, snap_t, snap_busy,
         snap_area) = self.core.finish()
        n_snap, n_st = len(snap_t), self.kind.size
        return SimResult(
            start=np.zeros(0), finish=np.zeros(0), op=None, busy=np.asarray(busy),
            area=np.asarray(area), completions=np.asarray(completions, dtype=np.int64),
            residence=np.asarray(residence), servers=self.servers, events=int(events),
            sim_time=float(sim_time), wall=self.wall + time.perf_counter() - t0, warmup=self.warmup,
            stats_start=float(stats_start), names=self.names, snap_t=np.asarray(snap_t),
            snap_busy=np.asarray(snap_busy).reshape(n_snap, n_st),
            snap_area=np.asarray(snap_area).reshape(n_snap, n_st))


def compiled_function(name: str) -> Any:
    """A function of the compiled core, or None (not built, or built before it existed)."""
    try:
        return getattr(_rust_core(), name, None)
    except EngineNotBuiltError:
        return None


def compiled() -> bool:
    """Whether the compiled core is importable."""
    try:
        _rust_core()
    except EngineNotBuiltError:
        return False
    return True
