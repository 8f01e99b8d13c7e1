"""Each request's concrete route through the Swift-like cluster model.

This module knows Swift (what a PUT, GET or DELETE visits and for how long); the engine
(`storlab.sim.engine`) only knows when things happen. Routes are built for all requests at
once with numpy: a PUT is one step at its proxy (client -> proxy NIC, proxy CPU), then a fork
to every replica (proxy NIC -> [leaf links] -> storage NIC -> object-server worker -> CPU ->
disk) joined at every live replica (`swift.post_quorum_wait`, the default), as Swift's proxy
waits for the rest past the quorum, or with `post_quorum_wait: false` at the write quorum
(`swift.write_quorum`, by default Swift's half the replicas rounded up: 2 of 3, 1 of 2, 2 of
4), the other replicas finishing in the background; a GET visits one replica chosen at random (Swift's `sorting_method = shuffle`), then streams back through
the proxy in a second step; a DELETE forks to every replica like a PUT, without payload.

Worker processes. An object-server worker blocks while its disk I/O runs (file I/O cannot be
made non-blocking under eventlet), so each storage node has a HOLD pool of `object_workers`
tokens: a replica takes a worker before its object-server CPU visit and keeps it through
its disk visits (the branch, or for a GET the first step, ends there). The node's CPU is
`cores` processor-sharing servers; with workers == cores the CPU idles while workers wait on
disks, and more workers than cores keep it busy (the seed's "2-3x cores" finding). Proxy
workers are eventlet processes whose network I/O does not block, so a proxy is not a pool: its
CPU is `min(proxy_workers, cores)` servers, a worker using one core at most. A node running
both gets `min(proxy_workers + object_workers, cores)` CPU servers and the object pool.

Simplifications, on purpose: store-and-forward (a visit ends before the next starts, where
Swift streams 64 KiB chunks), no container/account updates, no memcache, failures as
`storlab.sim.failures` models them; an
object's whole payload is one disk I/O (one positioning, then streaming); an object-server
worker serves one request at a time (no eventlet concurrency inside a worker while it waits
on a disk).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .devices import SMALL_IO
from .engine import Routes
from .failures import adjust_routes
from .model import ClusterModel, Requests
from .ops import GET, OPS, PUT


class _Template:
    """One operation's routes as dense [n, slots] arrays plus the branch/step layout."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.cols_st: list[np.ndarray] = []
        self.cols_dem: list[np.ndarray] = []
        self.cols_on: list[np.ndarray] = []
        self.slot_branch: list[int] = []
        self.branch_step: list[int] = []
        self.step_quorum: list[int] = []

    def step(self, quorum: int) -> None:
        self.step_quorum.append(quorum)

    def branch(self) -> None:
        self.branch_step.append(len(self.step_quorum) - 1)

    def visit(self, st: np.ndarray, dem: np.ndarray, on: np.ndarray | bool = True) -> None:
        self.cols_st.append(np.broadcast_to(st, (self.n,)))
        self.cols_dem.append(np.broadcast_to(dem, (self.n,)))
        self.cols_on.append(np.broadcast_to(np.asarray(on, dtype=bool), (self.n,)))
        self.slot_branch.append(len(self.branch_step) - 1)


def _route_templates(model: ClusterModel, req: Requests) -> dict[int, tuple[np.ndarray, _Template]]:
    """For each op present: the request indices and their dense route template."""
    spec = model.spec
    sw = spec.swift
    costs = spec.cpu_cost
    R = model.ring.replicas
    out: dict[int, tuple[np.ndarray, _Template]] = {}
    ls = model.leaf_spine
    small = float(SMALL_IO)

    def disk_time(dev: np.ndarray, size: np.ndarray, write: bool, meta: int
                  ) -> tuple[np.ndarray, np.ndarray]:
        """(time on the disk's FCFS servers, time on its shared-bandwidth station)."""
        t = np.empty(dev.shape, dtype=float)
        bw = np.zeros(dev.shape, dtype=float)
        mi = model.dev_model[dev]
        for k, m in enumerate(model.models):
            sel = mi == k
            if not sel.any():
                continue
            xfer = m.transfer(size[sel], write) + meta * m.transfer(small, write)
            t[sel] = (1 + meta) * m.overhead(write) + (0.0 if m.split else xfer)
            if m.split:
                bw[sel] = xfer
        return t, bw

    def disk_visits(t: _Template, dev: np.ndarray, size: np.ndarray, write: bool, meta: int,
                    read_order: bool = False) -> None:
        fc, bw = disk_time(dev, size, write, meta)
        bws = model.dev_bw_station[dev]
        on = bws >= 0
        # A write transfers then commits; a read is issued, then streams out.
        if not read_order and on.any():
            t.visit(np.where(on, bws, 0), bw, on)
        t.visit(model.dev_station[dev], fc)
        if read_order and on.any():
            t.visit(np.where(on, bws, 0), bw, on)

    def cpu_time(kind: str, opname: str, node: np.ndarray, size: np.ndarray) -> np.ndarray:
        c = (costs.proxy if kind == "proxy" else costs.object)[opname]
        return (c.base_ms + c.ms_per_mb * size / 1e6) * 1e-3 * model.node_cpu_scale[node]

    for code, opname in enumerate(OPS):
        idx = np.flatnonzero(req.op == code)
        if idx.size == 0:
            continue
        n = idx.size
        size = req.size[idx].astype(float)
        p = req.proxy[idx]
        rack_p = model.node_rack[p]
        t = _Template(n)
        if code == GET:
            dev = req.devs[idx, req.read_replica[idx]]
            sn = model.ring.dev_node[dev]
            rack_s = model.node_rack[sn]
            remote = sn != p
            cross = ls & (rack_s != rack_p)
            t.step(1)
            t.branch()
            t.visit(model.node_cpu[p], cpu_time("proxy", opname, p, size))
            t.visit(model.node_pool[sn], 0.0)  # an object-server worker, held to the disk's end
            t.visit(model.node_cpu[sn], cpu_time("object", opname, sn, size))
            disk_visits(t, dev, size, False, sw.get_meta_ios, read_order=True)
            # The worker is freed when the read is done: the send back is a second step.
            t.step(1)
            t.branch()
            t.visit(model.node_tx[sn], size / model.node_nic_bps[sn], remote)
            if ls:
                t.visit(model.rack_up[rack_s], size / model.rack_bps[rack_s], cross)
                t.visit(model.rack_down[rack_p], size / model.rack_bps[rack_p], cross)
            t.visit(model.node_rx[p], size / model.node_nic_bps[p], remote)
            t.visit(model.node_tx[p], size / model.node_nic_bps[p])
            if ls:  # clients sit outside the racks, behind the spine
                t.visit(model.rack_up[rack_p], size / model.rack_bps[rack_p])
        else:
            put = code == PUT
            t.step(1)
            t.branch()
            if put:
                if ls:
                    t.visit(model.rack_down[rack_p], size / model.rack_bps[rack_p])
                t.visit(model.node_rx[p], size / model.node_nic_bps[p])
            t.visit(model.node_cpu[p], cpu_time("proxy", opname, p, size))
            # DELETE joins like PUT. With post_quorum_wait the response waits for every
            # replica (a failed one is cut from the route and the join with it); the quorum
            # then only decides whether the write succeeds (storlab.sim.failures).
            t.step(R if sw.post_quorum_wait else int(sw.write_quorum or 1))
            for r in range(R):
                dev = req.devs[idx, r]
                sn = model.ring.dev_node[dev]
                rack_s = model.node_rack[sn]
                remote = sn != p
                cross = ls & (rack_s != rack_p)
                t.branch()
                if put:
                    t.visit(model.node_tx[p], size / model.node_nic_bps[p], remote)
                    if ls:
                        t.visit(model.rack_up[rack_p], size / model.rack_bps[rack_p], cross)
                        t.visit(model.rack_down[rack_s], size / model.rack_bps[rack_s], cross)
                    t.visit(model.node_rx[sn], size / model.node_nic_bps[sn], remote)
                t.visit(model.node_pool[sn], 0.0)  # the worker, held until the branch ends
                t.visit(model.node_cpu[sn], cpu_time("object", opname, sn, size))
                if put:
                    disk_visits(t, dev, size, True, sw.put_meta_ios)
                else:
                    disk_visits(t, dev, np.full(n, small), True, max(sw.delete_meta_ios - 1, 0))
        out[code] = (idx, t)
    return out


#: Requests per chunk of route building: bounds the dense temporaries (requests x slots)
#: whatever the run's length, so memory grows only with the routes themselves.
ROUTE_CHUNK = 1 << 16


def slice_requests(req: Requests, a: int, b: int) -> Requests:
    """Requests a:b (every per-request array sliced, whatever fields Requests carries)."""
    n = len(req)
    kw = {f.name: (v[a:b] if isinstance(v := getattr(req, f.name), np.ndarray)
                   and v.ndim >= 1 and v.shape[0] == n else v)
          for f in dataclasses.fields(req)}
    return Requests(**kw)


def _routes_chunk(model: ClusterModel, req: Requests
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                             np.ndarray, np.ndarray]:
    """One chunk's routes, linear in its requests: every op's dense template is written into
    [requests, slots] arrays padded to the widest op, and row-major boolean selection
    flattens them in request order. Returns steps per request, branches per step, quorum
    per step, visits per branch, station, demand (and the ops)."""
    n = len(req)
    temps = _route_templates(model, req)
    shapes = {code: (len(t.step_quorum), len(t.branch_step), len(t.slot_branch))
              for code, (_, t) in temps.items()}
    S = max(v[0] for v in shapes.values())
    B = max(v[1] for v in shapes.values())
    V = max(v[2] for v in shapes.values())
    n_steps = np.zeros(n, dtype=np.int64)
    n_br = np.zeros(n, dtype=np.int64)
    bps = np.zeros((n, S), dtype=np.int64)
    quo = np.zeros((n, S), dtype=np.int32)
    vpb = np.zeros((n, B), dtype=np.int64)
    st = np.zeros((n, V), dtype=np.int32)
    dem = np.zeros((n, V), dtype=np.float64)
    on = np.zeros((n, V), dtype=bool)
    for code, (idx, t) in temps.items():
        s_, b_, v_ = shapes[code]
        n_steps[idx] = s_
        n_br[idx] = b_
        bps[idx, :s_] = np.bincount(np.asarray(t.branch_step), minlength=s_)
        quo[idx, :s_] = np.asarray(t.step_quorum, dtype=np.int32)
        o = np.stack(t.cols_on, axis=1)
        slot_branch = np.asarray(t.slot_branch)
        starts = np.flatnonzero(np.r_[True, slot_branch[1:] != slot_branch[:-1]])
        counts = np.add.reduceat(o.astype(np.int64), starts, axis=1)
        if np.any(counts == 0):
            raise AssertionError("a route branch has no visit")
        vpb[idx, :b_] = counts
        on[idx, :v_] = o
        st[idx, :v_] = np.stack(t.cols_st, axis=1)
        dem[idx, :v_] = np.stack(t.cols_dem, axis=1)
    step_on = np.arange(S) < n_steps[:, None]
    br_on = np.arange(B) < n_br[:, None]
    return n_steps, bps[step_on], quo[step_on], vpb[br_on], st[on], dem[on], req.op


def build_routes(model: ClusterModel, req: Requests, chunk: int = ROUTE_CHUNK) -> Routes:
    """Every request's route, flattened into the engine's CSR arrays in request order; built
    in chunks of `chunk` requests (time and memory linear in the requests)."""
    n = len(req)
    parts = [_routes_chunk(model, slice_requests(req, a, min(a + chunk, n)))
             for a in range(0, n, chunk)]

    def ptr(k: int) -> np.ndarray:
        out = np.empty(sum(p[k].size for p in parts) + 1, dtype=np.int64)
        out[0] = 0
        np.cumsum(np.concatenate([p[k] for p in parts]), out=out[1:])
        return out

    step_ptr, branch_ptr, visit_ptr = ptr(0), ptr(1), ptr(3)
    quorum = np.concatenate([p[2] for p in parts])
    op = np.concatenate([p[6] for p in parts]).astype(np.int8)
    # The big arrays last, freeing each chunk once copied.
    station = np.empty(int(visit_ptr[-1]), dtype=np.int32)
    demand = np.empty(int(visit_ptr[-1]), dtype=np.float64)
    at = 0
    for k in range(len(parts)):
        s_, d_ = parts[k][4], parts[k][5]
        station[at:at + s_.size] = s_
        demand[at:at + d_.size] = d_
        at += s_.size
        parts[k] = ()  # type: ignore[call-overload]
    return adjust_routes(model, req, Routes(
        step_ptr=step_ptr, branch_ptr=branch_ptr, quorum=quorum, visit_ptr=visit_ptr,
        station=station, demand=demand, op=op))
