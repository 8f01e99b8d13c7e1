"""Failed devices and nodes: where each request goes instead, and which requests fail.

A cluster file marks devices or nodes failed (`failures: [{device: 3}, {node: store-2}]`,
or the shortcuts `failed_disks: N` / `failed_nodes: N`, which sweep like any factor). Routing
then follows Swift's proxy:

- GET: a random live primary (Swift's `sorting_method = shuffle` tries the primaries in
  random order and skips the dead ones); with every primary down the request fails: the
  handoffs do not hold the object (rebuild onto them is not modelled).
- PUT and DELETE: the first `replicas` live devices of primaries-then-handoffs, handoffs in
  `Ring.get_more_nodes` order (a live primary keeps its replica slot, each dead one is
  replaced by the next live handoff); the write succeeds when `write_quorum` of them have;
  with fewer live devices than the quorum it fails.
- A request whose proxy is down goes to a live proxy; with none, it fails.

A failed request costs its proxy's CPU visit only (Swift answers 503 at once) and is left out
of throughput and latency; the report's `availability` column is the share that succeeded.
A failure holds for the whole run unless it has `at:`/`until:` (`10s`, `2m`). In an open loop
(`workload.rate`) each request's arrival time, known before the run, says which failures it
meets. In a closed loop a request's start time is only known once simulated, so the run is
settled by a fixed point (`settle`): simulate, route every request by the failure state at
its simulated start, simulate again, until no request changes window. It is exact: a
request's route depends only on its own draws and its window (`apply_failures` draws one
uniform per request and decision), and the events before the earliest request in a wrong
window do not change on the next pass, so that request is right from then on.

Rebuild: `rebuild_mb_s` (per failure, or top level for the shortcuts) takes that much bandwidth from every surviving disk
that holds a replica of a failed device's partitions (Swift's replicators read the surviving
copies and write the handoffs), by lengthening their disk visits by 1 / (1 - share).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import SimError
from .ops import DELETE, DRAW_BLOCK, GET, OPS, PUT

if TYPE_CHECKING:
    from .model import ClusterModel, Requests
    from .engine import Routes

_TIME_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|h)?\s*$")


def parse_time(value: Any) -> float:
    """Seconds from 10, '10s', '250ms', '2m', '1h'."""
    if isinstance(value, bool):
        raise ValueError(f"not a time: {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"time must be >= 0, got {value!r}")
        return float(value)
    m = _TIME_RE.match(str(value))
    if not m:
        raise ValueError(f"not a time: {value!r} (use 10, 10s, 250ms, 2m)")
    return float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}[m.group(2) or "s"]


class Failure(BaseModel):
    """One failed device or node (by index, or by name: `store-3`, `store-3/disk40`)."""

    model_config = ConfigDict(extra="forbid")
    device: int | str | None = None
    node: int | str | None = None
    at: Any = 0
    until: Any = None
    rebuild_mb_s: float = Field(0.0, ge=0, description="replication traffic per surviving disk")

    @field_validator("at", "until")
    @classmethod
    def _time(cls, v: Any) -> Any:
        return None if v is None else parse_time(v)

    @model_validator(mode="after")
    def _one(self) -> "Failure":
        if (self.device is None) == (self.node is None):
            raise ValueError("a failure names either a device or a node")
        if self.until is not None and self.until <= self.at:
            raise ValueError(f"failure until {self.until} s is not after at {self.at} s")
        return self

    @property
    def whole_run(self) -> bool:
        return self.at == 0 and self.until is None


@dataclass
class FailureState:
    """What is down, resolved against a built model."""

    dev_failed: np.ndarray     # bool per device
    node_failed: np.ndarray    # bool per node
    rebuild_mb_s: float = 0.0

    @property
    def any(self) -> bool:
        return bool(self.dev_failed.any() or self.node_failed.any())


def _resolve(model: ClusterModel, f: Failure, dev_failed: np.ndarray,
             node_failed: np.ndarray) -> None:

    names = model.stations.names or []
    if f.node is not None:
        if isinstance(f.node, int):
            k = f.node
        else:
            cpu = {names[s]: i for i, s in enumerate(model.node_cpu.tolist())}
            k = cpu.get(f"{f.node}/cpu", -1)
        if not 0 <= k < model.n_nodes:
            raise SimError(f"failures: node {f.node!r} is not a node of this cluster "
                           f"(0..{model.n_nodes - 1} or a name like "
                           f"{names[model.node_cpu[0]].removesuffix('/cpu')!r})")
        node_failed[k] = True
        dev_failed[model.ring.dev_node == k] = True
        return
    n_dev = model.ring.dev_node.size
    if isinstance(f.device, int):
        d = f.device
    else:
        by_name = {names[s]: i for i, s in enumerate(model.dev_station.tolist())}
        d = by_name.get(str(f.device), -1)
    if not 0 <= d < n_dev:
        raise SimError(f"failures: device {f.device!r} is not a device of this cluster "
                       f"(0..{n_dev - 1} or a name like {names[model.dev_station[0]]!r})")
    dev_failed[d] = True


def any_failures(spec: Any) -> bool:
    """Whether the cluster file models failures (listed, or the failed_disks/failed_nodes
    shortcuts)."""
    return bool(spec.failures or spec.failed_disks or spec.failed_nodes)


def refuse_analytic(spec: Any) -> None:
    """The mean-value model has no failures: say so rather than answer without them."""

    if any_failures(spec):
        raise SimError("--analytic does not model failures (failures, failed_disks, "
                       "failed_nodes): simulate instead")


def shortcut_devices(model: ClusterModel, n: int) -> list[int]:
    """`failed_disks: N`: the first disk of storage nodes 0, 1, ... (then their second
    disks), so N failed disks sit on N different nodes as long as there are enough."""
    node = model.ring.dev_node
    nodes = list(dict.fromkeys(node.tolist()))
    per = [np.flatnonzero(node == k).tolist() for k in nodes]
    order = [p[j] for j in range(max(map(len, per))) for p in per if j < len(p)]
    return order[:n]


def failure_state(model: ClusterModel, only: list[Failure] | None = None,
                  shortcuts: bool = True) -> FailureState:
    """What is down when `only` (default: every listed failure) and the shortcuts are."""

    spec = model.spec
    dev_failed = np.zeros(model.ring.dev_node.size, dtype=bool)
    node_failed = np.zeros(model.n_nodes, dtype=bool)
    chosen = spec.failures if only is None else only
    for f in chosen:
        _resolve(model, f, dev_failed, node_failed)
    rebuild = max([f.rebuild_mb_s for f in chosen] + [0.0])
    if shortcuts:
        if spec.failed_disks:
            if spec.failed_disks > dev_failed.size:
                raise SimError(f"failed_disks {spec.failed_disks} > the cluster's "
                               f"{dev_failed.size} disks")
            dev_failed[shortcut_devices(model, spec.failed_disks)] = True
        if spec.failed_nodes:
            storage = list(dict.fromkeys(model.ring.dev_node.tolist()))
            if spec.failed_nodes > len(storage):
                raise SimError(f"failed_nodes {spec.failed_nodes} > the cluster's "
                               f"{len(storage)} storage nodes")
            for k in storage[:spec.failed_nodes]:
                node_failed[k] = True
                dev_failed[model.ring.dev_node == k] = True
        rebuild = max(rebuild, spec.rebuild_mb_s)
    return FailureState(dev_failed, node_failed, rebuild)


@dataclass
class FailurePlan:
    """Failure states over time: `states[e]` holds from `starts[e]` to the next start;
    `epoch[i]` is the state request i meets (by its arrival time). `provisional`: a closed
    loop's epochs from simulated start times that `settle` must still confirm."""

    starts: np.ndarray
    states: list[FailureState]
    epoch: np.ndarray
    provisional: bool = False
    passes: int = 0                    # simulations `settle` needed (closed loop)

    @property
    def any(self) -> bool:
        return any(st.any for st in self.states)


def failure_starts(spec: Any) -> np.ndarray:
    """When each failure state of a run begins (0, then every timed failure's at/until)."""
    timed = [f for f in spec.failures if not f.whole_run]
    return np.asarray(sorted({0.0, *(f.at for f in timed),
                              *(f.until for f in timed if f.until)}))


def needs_settle(spec: Any) -> bool:
    """Whether a run's failures need `settle`'s whole-run fixed point: timed windows in a
    closed loop (a request's window depends on its simulated start). Every other run with
    failures routes each draw block alone, so it can stream (storlab.sim.stream)."""
    return spec.workload.rate is None and failure_starts(spec).size > 1


def failure_plan(model: ClusterModel, req: Requests, starts: np.ndarray | None = None
                 ) -> FailurePlan:
    """Epochs between failure times, by each request's arrival time (open loop) or its
    simulated start `starts` (closed loop; none yet: every request in the first epoch)."""

    spec = model.spec
    n = len(req)
    begins = failure_starts(spec)
    if begins.size == 1:
        return FailurePlan(np.zeros(1), [failure_state(model)], np.zeros(n, dtype=np.int64))
    states = []
    for t in begins.tolist():
        active = [f for f in spec.failures
                  if f.at <= t and (f.until is None or t < f.until)]
        states.append(failure_state(model, active))
    closed = req.arrivals is None
    when = req.arrivals if not closed else (np.zeros(n) if starts is None else starts)
    epoch = np.searchsorted(begins, when, side="right") - 1
    return FailurePlan(begins, states, epoch, provisional=closed)


def apply_failures(model: ClusterModel, req: Requests, starts: np.ndarray | None = None,
                   stream: int = 0) -> Requests:
    """Re-target requests around failed devices and proxies; mark those that fail. `req`
    is left as drawn (the result keeps it as `drawn`, so a closed loop can re-route it by
    simulated `starts`). Without failures the requests come back unchanged. `stream`: the
    first draw block of `req` (`model.iter_requests`); each block has its own draws."""
    base = req.drawn if req.drawn is not None else req
    plan = failure_plan(model, base, starts)
    model.extra["failures"] = plan
    n = len(base)
    if not plan.any:
        return base if not plan.provisional else dataclasses.replace(base, drawn=base)
    ok = np.ones(n, dtype=bool)
    out = dataclasses.replace(base, proxy=base.proxy.copy(),
                              read_replica=base.read_replica.copy(), devs=base.devs.copy(),
                              drawn=base)
    # One uniform per request and decision (proxy, replica read): a request's route depends
    # on its own draws and its epoch only, whatever happens to the others (settle needs it).
    u = _uniforms(model.spec.workload.seed, n, stream)
    for e, st in enumerate(plan.states):
        if st.any:
            _apply_state(model, out, np.flatnonzero(plan.epoch == e), st, ok, u)
    if not ok.any():
        raise SimError("failures: every request fails (no live proxy, replica or write "
                       "quorum): nothing to simulate")
    out.ok = ok
    return out


def _uniforms(seed: int, n: int, block: int) -> np.ndarray:
    """(n, 2) uniforms for requests drawn from `block` on: each draw block of the run has
    its own stream (seed, 7, block), so a block routed alone and the whole run routed at
    once (`settle`) give every request the same draws."""
    parts = []
    for b, a in enumerate(range(0, max(n, 1), DRAW_BLOCK), start=block):
        rng = np.random.default_rng([seed, 7] if b == 0 else [seed, 7, b])
        parts.append(rng.random((min(DRAW_BLOCK, n - a), 2)))
    return np.concatenate(parts)


#: Most simulations `settle` runs before giving up on a closed loop's failure windows.
MAX_PASSES = 60


def settle(model: ClusterModel, req: Requests, simulate: Callable[[Requests], Any]
           ) -> tuple[Requests, Any]:
    """A closed loop with failure windows: simulate, re-route every request by the failure
    state at its simulated start, and repeat until no request changes window (the run is
    then what a simulator deciding routes at issue time would give). Returns the settled
    requests and `simulate`'s result for them. The compiled engine runs the same fixed
    point pass by pass in blocks (`stream.run_settled_stream`); this is the whole-run form
    (the Python engine's)."""
    res = simulate(req)
    plan: FailurePlan = model.extra["failures"]
    for k in range(1, MAX_PASSES + 1):
        new = apply_failures(model, req, starts=np.asarray(res.start))
        moved = int(np.sum(model.extra["failures"].epoch != plan.epoch))
        if moved == 0:
            plan.passes = k
            model.extra["failures"] = plan
            return req, res
        req, plan = new, model.extra["failures"]
        res = simulate(req)
    raise SimError(f"failure windows in a closed loop: {moved} requests still change window "
                   f"after {MAX_PASSES} simulations; use an open loop (workload.rate)")


def _apply_state(model: ClusterModel, req: Requests, rows: np.ndarray, st: FailureState,
                 ok: np.ndarray, u: np.ndarray) -> None:
    """Route requests `rows` (one failure state) around what is down, in place."""

    R = req.devs.shape[1]
    # Proxies: a dead one's requests move to a live one.
    dead_p = rows[st.node_failed[req.proxy[rows]]]
    live_proxies = model.proxies[~st.node_failed[model.proxies]]
    if dead_p.size:
        if live_proxies.size == 0:
            ok[rows] = False
        else:
            req.proxy[dead_p] = live_proxies[np.minimum(
                (u[dead_p, 0] * live_proxies.size).astype(np.int64), live_proxies.size - 1)]
    alive = ~st.dev_failed[req.devs[rows]]            # [rows, R]
    op = req.op[rows]
    # GET: a random live primary.
    get = op == GET
    n_live = alive.sum(axis=1)
    redo = get & ~alive[np.arange(rows.size), req.read_replica[rows]] & (n_live > 0)
    ok[rows[get & (n_live == 0)]] = False
    if redo.any():
        k = np.flatnonzero(redo)
        pick = (u[rows[k], 1] * n_live[k]).astype(np.int64)   # the pick-th live one
        rank = np.cumsum(alive[k], axis=1) - 1
        req.read_replica[rows[k]] = np.argmax((rank == pick[:, None]) & alive[k], axis=1)
    # PUT / DELETE: dead primaries replaced by live handoffs, in Swift's order.
    hit = rows[((op == PUT) | (op == DELETE)) & (n_live < R)]
    if hit.size:
        part = _request_partitions(model, req)
        quorum = int(model.spec.swift.write_quorum or 1)
        memo: dict[int, tuple[list[int], bool]] = {}
        for i in hit.tolist():
            p = int(part[i])
            if p not in memo:
                memo[p] = _write_targets(model, st, p, R, quorum)
            targets, enough = memo[p]
            if enough:
                req.devs[i] = targets
            else:
                ok[i] = False


def _request_partitions(model: ClusterModel, req: Requests) -> np.ndarray:
    """Each request's partition (its primaries' column in r2p2d)."""
    if req.part is None:
        raise AssertionError("requests carry no partitions")
    return req.part


def _write_targets(model: ClusterModel, st: FailureState, part: int, R: int,
                   quorum: int) -> tuple[list[int], bool]:
    """Replica slots of a write: live primaries in place, dead ones filled from the live
    handoffs in order; (targets, at least `quorum` live)."""
    ring = model.ring
    prim = ring.r2p2d[:, part].tolist()
    spare = (d for d in ring.iter_handoffs(part) if not st.dev_failed[d])
    out = []
    live = 0
    for d in prim:
        if not st.dev_failed[d]:
            out.append(d)
            live += 1
            continue
        nxt = next(spare, None)
        if nxt is None:
            out.append(d)      # nowhere to write: this slot stays dead
        else:
            out.append(nxt)
            live += 1
    # Fewer live devices in the whole ring than replicas: the dead slot stays (its branch is
    # cut from the route) and the write succeeds if the others reach the quorum.
    return out, live >= quorum


def strip_failed(model: ClusterModel, req: Requests, routes: Routes) -> Routes:
    """Cut from the routes what failures make impossible: a failed request keeps only its
    proxy's CPU visit (a quick 503); a write's branch to a dead device (no live handoff left
    for its slot) is dropped, the step's quorum counting the others."""
    plan: FailurePlan | None = model.extra.get("failures")
    ok = req.ok
    if plan is None or not plan.any or ok is None:
        return routes
    from .engine import Routes as _Routes

    n = len(req)
    sp, bp, vp = routes.step_ptr, routes.branch_ptr, routes.visit_ptr
    bad = ~ok
    n_steps = np.diff(sp)
    step_req = np.repeat(np.arange(n), n_steps)
    first_step = np.zeros(sp[-1], dtype=bool)
    first_step[sp[:-1][n_steps > 0]] = True
    n_br = np.diff(bp)
    br_step = np.repeat(np.arange(sp[-1]), n_br)
    first_br = np.zeros(bp[-1], dtype=bool)
    first_br[bp[:-1][n_br > 0]] = True
    br_req = step_req[br_step]
    n_v = np.diff(vp)
    v_br = np.repeat(np.arange(bp[-1]), n_v)
    v_req = br_req[v_br]
    # A visit to a disk that is down when its request arrives.
    st_dev = _station_devices(model)
    failed = np.stack([st.dev_failed for st in plan.states])      # [epochs, devices]
    d = st_dev[routes.station]
    on_disk = np.flatnonzero(d >= 0)
    dead_v = on_disk[failed[plan.epoch[v_req[on_disk]], d[on_disk]]]
    br_dead = np.bincount(v_br[dead_v], minlength=bp[-1]) > 0
    keep_step = ok[step_req] | first_step
    keep_br = keep_step[br_step] & np.where(ok[br_req], ~br_dead, first_br)
    # A failed request keeps one visit: its proxy CPU's first.
    cpu = model.node_cpu[req.proxy]
    cand = np.flatnonzero(keep_br[v_br] & bad[v_req] & (routes.station == cpu[v_req]))
    first_cpu = np.zeros(v_br.size, dtype=bool)
    if cand.size:
        _, first = np.unique(v_req[cand], return_index=True)
        first_cpu[cand[first]] = True
    keep_v = keep_br[v_br] & (ok[v_req] | first_cpu)
    visits_per_br = np.bincount(v_br[keep_v], minlength=bp[-1])[keep_br]
    br_per_step = np.bincount(br_step[keep_br], minlength=sp[-1])[keep_step]
    if np.any(visits_per_br == 0) or np.any(br_per_step == 0):
        raise AssertionError("a failed request kept no proxy visit")
    steps_per_req = np.bincount(step_req[keep_step], minlength=n)
    quorum = np.minimum(routes.quorum[keep_step], br_per_step)
    quorum[bad[step_req[keep_step]]] = 1
    return _Routes(step_ptr=np.concatenate(([0], np.cumsum(steps_per_req))),
                   branch_ptr=np.concatenate(([0], np.cumsum(br_per_step))),
                   quorum=quorum.astype(np.int32),
                   visit_ptr=np.concatenate(([0], np.cumsum(visits_per_br))),
                   station=routes.station[keep_v], demand=routes.demand[keep_v],
                   op=routes.op)


def _station_devices(model: ClusterModel) -> np.ndarray:
    """Device of each station (its disk or its shared-bandwidth station), -1 elsewhere."""
    out = np.full(model.stations.kind.size, -1, dtype=np.int64)
    out[model.dev_station] = np.arange(model.dev_station.size)
    bw = model.dev_bw_station
    out[bw[bw >= 0]] = np.flatnonzero(bw >= 0)
    return out


def apply_rebuild(model: ClusterModel, req: Requests, routes: Routes) -> Routes:
    """Rebuild traffic: lengthen disk visits on the surviving disks that share partitions
    with a failed device, by the share of their bandwidth the rebuild takes, for requests
    arriving while the failure lasts."""
    plan: FailurePlan | None = model.extra.get("failures")
    if plan is None or not any(st.any and st.rebuild_mb_s > 0 for st in plan.states):
        return routes

    ring = model.ring
    scale = np.ones((len(plan.states), model.stations.kind.size))
    for e, st in enumerate(plan.states):
        if not st.any or st.rebuild_mb_s <= 0:
            continue
        cols = np.flatnonzero(st.dev_failed[ring.r2p2d].any(axis=0))
        peers = np.unique(ring.r2p2d[:, cols])
        for d in peers[~st.dev_failed[peers]].tolist():
            m = model.models[int(model.dev_model[d])]
            bw = m.seq_mb_s(False)        # a rebuild streams whole partitions
            share = st.rebuild_mb_s / bw
            if share >= 1:
                raise SimError(f"rebuild_mb_s {st.rebuild_mb_s} takes all of a {m.name} "
                               f"disk's {bw:.0f} MB/s")
            scale[e, model.dev_station[d]] = 1.0 / (1.0 - share)
            if model.dev_bw_station[d] >= 0:
                scale[e, model.dev_bw_station[d]] = 1.0 / (1.0 - share)
    v_req = np.repeat(np.arange(len(req)), np.diff(routes.visit_ptr[routes.branch_ptr[
        routes.step_ptr]]))
    routes.demand = routes.demand * scale[plan.epoch[v_req], routes.station]
    return routes


def adjust_routes(model: ClusterModel, req: Requests, routes: Routes) -> Routes:
    """Both route changes failures make: cuts (`strip_failed`), then rebuild load."""
    return apply_rebuild(model, req, strip_failed(model, req, routes))


@dataclass
class FailureCounts:
    """What the report says about failures, counted from requests a block at a time (so a
    streamed run needs no per-request arrays): per operation, the requests after the
    warm-up and those that failed; per failure epoch (by arrival), the requests placed in
    it, re-routed and failed."""

    total: np.ndarray          # [ops]
    failed: np.ndarray         # [ops]
    requests: np.ndarray       # [epochs]
    rerouted: np.ndarray       # [epochs]
    failed_epoch: np.ndarray   # [epochs]
    has_ok: bool = False       # some request carried a success flag (failures applied)

    @classmethod
    def zeros(cls, epochs: int) -> "FailureCounts":
        z = np.zeros(epochs, dtype=np.int64)
        return cls(np.zeros(len(OPS), dtype=np.int64), np.zeros(len(OPS), dtype=np.int64),
                   z, z.copy(), z.copy())

    def add(self, req: Requests, epoch: np.ndarray, warmup: int, offset: int = 0) -> None:
        """Requests `offset`.. of the run (`epoch`: each one's failure epoch)."""
        n = len(req)
        ok = req.ok if req.ok is not None else np.ones(n, dtype=bool)
        self.has_ok |= req.ok is not None
        after = np.arange(offset, offset + n) >= warmup
        op = req.op.astype(np.int64)
        self.total += np.bincount(op[after], minlength=len(OPS))
        self.failed += np.bincount(op[after & ~ok], minlength=len(OPS))
        base = req.drawn if req.drawn is not None else req
        rows = np.arange(n)
        moved = ((req.proxy != base.proxy) | np.any(req.devs != base.devs, axis=1)
                 | ((req.op == GET) & (req.devs[rows, req.read_replica]
                                       != base.devs[rows, base.read_replica])))
        E = self.requests.size
        self.requests += np.bincount(epoch, minlength=E)
        self.rerouted += np.bincount(epoch[moved & ok], minlength=E)
        self.failed_epoch += np.bincount(epoch[~ok], minlength=E)


def add_availability(report: Any, req: Requests, warmup: int) -> None:
    """`failed` and `availability` columns in the report's ops table (after warm-up)."""
    if req.ok is None:
        return
    c = FailureCounts.zeros(1)
    c.add(req, np.zeros(len(req), dtype=np.int64), warmup)
    add_availability_counts(report, c)


def add_availability_counts(report: Any, c: FailureCounts) -> None:
    """`add_availability` from counts (a streamed run's)."""
    if not c.has_ok:
        return
    import pandas as pd

    # An operation whose every request failed has no row yet: add one, with no throughput.
    missing = [{"op": name, "count": 0, "ops_s": 0.0, "mb_s": 0.0}
               for code, name in enumerate(OPS)
               if name not in set(report.ops["op"]) and c.total[code] > 0]
    if missing:
        report.ops = pd.concat([report.ops, pd.DataFrame(missing)], ignore_index=True)
    failed, avail = [], []
    for op in report.ops["op"]:
        k = int(c.total.sum() if op == "ALL" else c.total[OPS.index(op)])
        bad = int(c.failed.sum() if op == "ALL" else c.failed[OPS.index(op)])
        failed.append(bad)
        avail.append(1.0 - bad / k if k else 1.0)
    report.ops["failed"] = failed
    report.ops["availability"] = avail
    lost = int(c.failed.sum())
    if lost:
        report.notes.append(f"{lost} requests failed (no live replica or quorum): left out of "
                            "throughput and latency, see availability")


def _down_names(model: ClusterModel, st: FailureState) -> list[str]:
    """What a failure state holds down: failed nodes by name, then the devices on live nodes."""
    names = model.stations.names or []
    out = [names[model.node_cpu[k]].removesuffix("/cpu") if names else f"node {k}"
           for k in np.flatnonzero(st.node_failed).tolist()]
    on_dead = st.node_failed[model.ring.dev_node]
    out += [names[model.dev_station[d]] if names else f"device {d}"
            for d in np.flatnonzero(st.dev_failed & ~on_dead).tolist()]
    return out


def describe_failures(model: ClusterModel, report: Any, req: Requests, res: Any = None
                      ) -> None:
    """`report.failures`: one entry per failure window (what is down, from/to in simulated
    seconds, how requests were placed in it, how many it re-routed and failed) and, given
    the engine's result `res`, the throughput and mean latency of the successful requests
    finishing inside the window against those finishing in the rest of the measured
    window."""
    plan: FailurePlan | None = model.extra.get("failures")
    if plan is None or not plan.any:
        return
    c = FailureCounts.zeros(plan.starts.size)
    c.add(req, plan.epoch, 0)
    ok = req.ok if req.ok is not None else np.ones(len(req), dtype=bool)

    def rates(out: list[dict[str, Any]], epochs: list[int], window: dict[str, Any]) -> None:
        _window_rates(out, window, np.asarray(res.start), np.asarray(res.finish), ok)

    describe_counts(model, report, plan, c, req.arrivals is None, res,
                    rates if res is not None else None)


def describe_counts(model: ClusterModel, report: Any, plan: FailurePlan, c: FailureCounts,
                    closed: bool, res: Any,
                    rates: Callable[[list[dict[str, Any]], list[int], dict[str, Any]], None]
                    | None) -> None:
    """`describe_failures` from counts: `rates(out, epochs, window)` adds each window's
    throughput and latency (per request, or from a streamed run's sums)."""
    if plan.starts.size == 1:
        how = "whole run"
    elif not closed:
        how = "by arrival time (open loop)"
    else:
        how = (f"by simulated start time (closed loop: settled after {plan.passes} "
               "simulations)")
    # The run's end: a window is cut there, and one that starts after it is only noted
    # (its times come from the cluster file, the run's length from the workload).
    run_end = float(res.sim_time) if res is not None else math.inf
    out, epochs = [], []
    for e, st in enumerate(plan.states):
        if not st.any:
            continue
        if plan.starts[e] >= run_end:
            report.notes.append(f"failure at {plan.starts[e]:g} s comes after the run's end "
                                f"({run_end:.3g} s): not simulated; simulate more requests")
            continue
        end = float(plan.starts[e + 1]) if e + 1 < plan.starts.size else None
        if end is not None and end >= run_end:
            end = None                  # down until the end of the run
        out.append({"down": _down_names(model, st), "from_s": float(plan.starts[e]),
                    "to_s": end, "placed": how, "requests": int(c.requests[e]),
                    "rerouted": int(c.rerouted[e]), "failed": int(c.failed_epoch[e]),
                    "rebuild_mb_s": float(st.rebuild_mb_s)})
        epochs.append(e)
    if report.window:
        report.window["down_share"] = down_share(out, report.window)
        if rates is not None:
            rates(out, epochs, report.window)
    report.failures = out


def _spans(out: list[dict[str, Any]], window: dict[str, Any]) -> list[tuple[float, float]]:
    """Each failure window (disjoint epochs) cut to the measured window: (from, to)."""
    t0, t1 = float(window["from_s"]), float(window["to_s"])
    return [(max(f["from_s"], t0), min(t1 if f["to_s"] is None else f["to_s"], t1))
            for f in out]


def down_share(out: list[dict[str, Any]], window: dict[str, Any]) -> float:
    """The share of the measured window with something down. Failure times are absolute
    while a run's length follows its workload, so two sweep points can see the same
    failure for different shares of their runs."""
    span = float(window["to_s"]) - float(window["from_s"])
    covered = sum(max(b - a, 0.0) for a, b in _spans(out, window))
    return covered / span if span > 0 else math.nan


def window_rates_from_sums(out: list[dict[str, Any]], epochs: list[int],
                           window: dict[str, Any], cnt: np.ndarray, lat_ms: np.ndarray) -> None:
    """`_window_rates` from the successful requests' count and summed latency (ms) per
    failure epoch of their finish, over the measured window (`summary.Tally` sums them)."""
    t0, t1 = float(window["from_s"]), float(window["to_s"])
    covered = 0.0
    for f, e, (a, b) in zip(out, epochs, _spans(out, window)):
        covered += max(b - a, 0.0)
        k = int(cnt[e])
        f["ops_s"] = float(k / (b - a)) if b > a else None
        f["lat_mean_ms"] = float(lat_ms[e] / k) if k else None
    rest = np.ones(cnt.size, dtype=bool)
    rest[epochs] = False
    k_rest = int(cnt[rest].sum())
    free = (t1 - t0) - covered
    for f in out:
        f["ops_s_outside"] = float(k_rest / free) if free > 0 and k_rest else None
        f["lat_mean_ms_outside"] = float(lat_ms[rest].sum() / k_rest) if k_rest else None


def _window_rates(out: list[dict[str, Any]], window: dict[str, Any], start: np.ndarray,
                  finish: np.ndarray, ok: np.ndarray) -> None:
    """Add ops_s / lat_mean_ms inside each failure window and outside every one (both cut
    to the measured window; None when a part is empty)."""
    t0, t1 = float(window["from_s"]), float(window["to_s"])
    counted = ok & (finish >= t0) & (finish < t1)
    lat = (finish - start) * 1e3
    in_any = np.zeros(finish.size, dtype=bool)
    covered = 0.0
    for f, (a, b) in zip(out, _spans(out, window)):
        sel = counted & (finish >= a) & (finish < b)
        in_any |= sel
        covered += max(b - a, 0.0)
        f["ops_s"] = float(sel.sum() / (b - a)) if b > a else None
        f["lat_mean_ms"] = float(lat[sel].mean()) if sel.any() else None
    rest = counted & ~in_any
    free = (t1 - t0) - covered
    for f in out:
        f["ops_s_outside"] = float(rest.sum() / free) if free > 0 and rest.any() else None
        f["lat_mean_ms_outside"] = float(lat[rest].mean()) if rest.any() else None
