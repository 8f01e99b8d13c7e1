"""The built cluster model (stations and lookup tables) and the requests drawn from it."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .devices import DeviceModel, PRESETS, resolve_device
from .engine import FCFS, HOLD, PS, Stations, compiled_function
from .ring import Ring, hash_partition
from .failures import apply_failures, failure_plan
from .ops import DRAW_BLOCK, OPS
from .ringfile import make_ring
from .spec import ClusterSpec, size_sampler


# ---------------------------------------------------------------------------------------
# the built model
@dataclass
class ClusterModel:
    """Stations and the lookup tables the route builder needs; built once per spec."""

    spec: ClusterSpec
    stations: Stations
    station_class: np.ndarray          # str per station: resource class for reports
    node_role: np.ndarray              # str per node
    node_cpu: np.ndarray               # station id per node
    node_pool: np.ndarray              # object-server worker pool (HOLD) per node, -1: none
    node_tx: np.ndarray
    node_rx: np.ndarray
    node_rack: np.ndarray
    node_cpu_scale: np.ndarray         # demand multiplier (ref GHz / (GHz * speed))
    node_nic_bps: np.ndarray           # payload bytes/s
    rack_up: np.ndarray                # station per rack (-1 in a star)
    rack_down: np.ndarray
    rack_bps: np.ndarray
    dev_station: np.ndarray
    dev_bw_station: np.ndarray         # shared-bandwidth station per device (-1: none)
    dev_model: np.ndarray              # index into `models`
    models: list[DeviceModel]
    ring: Ring
    proxies: np.ndarray                # node ids that run a proxy
    leaf_spine: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_nodes(self) -> int:
        return int(self.node_cpu.size)

    def classes(self) -> list[str]:
        return list(dict.fromkeys(self.station_class.tolist()))


def _workers(value: int | str, cores: int) -> int:
    return cores if value == "auto" else int(value)


def build_model(spec: ClusterSpec) -> ClusterModel:
    """Stations for every CPU, NIC direction, leaf link and disk; the ring over the disks."""
    kinds: list[int] = []
    servers: list[int] = []
    names: list[str] = []
    classes: list[str] = []

    def add(kind: int, c: int, name: str, cls: str) -> int:
        kinds.append(kind)
        servers.append(c)
        names.append(name)
        classes.append(cls)
        return len(kinds) - 1

    sw = spec.swift
    net = spec.network
    eff = net.efficiency
    role, cpu, pool, tx, rx, scale, nic_bps = [], [], [], [], [], [], []
    dev_node, dev_zone, dev_weight, dev_station, dev_model = [], [], [], [], []
    dev_region: list[int] = []
    given_zones = any(g.zone is not None for g in spec.nodes)
    dev_bw: list[int] = []
    models: list[DeviceModel] = []
    model_index: dict[str, int] = {}
    storage_rank = 0
    n = 0
    for gi, g in enumerate(spec.nodes):
        gname = g.name or f"{g.role}{gi}"
        for k in range(g.count):
            label = f"{gname}-{k}"
            pw = _workers(sw.proxy_workers, g.cpu.cores) if g.role in ("proxy", "both") else 0
            ow = _workers(sw.object_workers, g.cpu.cores) if g.role in ("storage", "both") else 0
            cls = {"proxy": "proxy_cpu", "storage": "storage_cpu", "both": "node_cpu"}[g.role]
            ncls = {"proxy": "proxy_nic", "storage": "storage_nic", "both": "node_nic"}[g.role]
            # A worker is one process: it can use one core at most. Object-server workers
            # are limited by their pool (they block on disks), so a storage node's CPU is
            # all its cores; proxy workers never block, so min(workers, cores) bounds them.
            c_cpu = g.cpu.cores if g.role == "storage" else min(pw + ow, g.cpu.cores)
            cpu.append(add(PS, c_cpu, f"{label}/cpu", cls))
            pool.append(add(HOLD, ow, f"{label}/object-workers", "object_workers") if ow else -1)
            tx.append(add(PS, 1, f"{label}/nic-tx", ncls))
            rx.append(add(PS, 1, f"{label}/nic-rx", ncls))
            role.append(g.role)
            scale.append(spec.cpu_cost.ref_ghz / (g.cpu.ghz * g.cpu.speed))
            nic_bps.append(g.nic * 1e9 / 8 * eff)
            has_disks = g.role in ("storage", "both") and any(d.count for d in g.disks)
            if has_disks:
                zone = storage_rank if sw.zones is None else storage_rank % sw.zones
                zone = g.placed_at("zone", k) if given_zones else zone
                region = g.placed_at("region", k) or 0
                storage_rank += 1
            for dg in g.disks if g.role in ("storage", "both") else []:
                key = dg.type if isinstance(dg.type, str) else dg.type.model_dump_json()
                if key not in model_index:
                    model_index[key] = len(models)
                    models.append(resolve_device(dg.type, spec.devices).scaled(
                        spec.calibration.disk_overhead, spec.calibration.disk_bandwidth))
                m = models[model_index[key]]
                spec_cap = (spec.devices.get(dg.type) or PRESETS.get(dg.type)
                            if isinstance(dg.type, str) else dg.type)
                weight = dg.weight if dg.weight is not None else spec_cap.capacity_tb
                for j in range(dg.count):
                    dev_node.append(n)
                    dev_zone.append(zone)
                    dev_region.append(region)
                    dev_weight.append(weight)
                    dev_model.append(model_index[key])
                    dname = f"{label}/disk{len(dev_node) - 1}"
                    dev_station.append(add(FCFS, m.servers, dname, "disk"))
                    dev_bw.append(add(PS, 1, f"{dname}-bw", "disk_bw") if m.split else -1)
            n += 1
    node_rack = np.zeros(n, dtype=np.int64)
    leaf_spine = net.topology == "leaf-spine"
    rack_up = rack_down = np.full(1, -1, dtype=np.int64)
    rack_bps = np.zeros(1)
    nic_arr = np.asarray(nic_bps)
    if leaf_spine:
        order = np.arange(n)
        if net.placement == "spread":
            # Interleave the groups: sort nodes by their relative position inside their group.
            frac = np.concatenate([(np.arange(g.count) + 0.5) / g.count
                                   for g in spec.nodes if g.count])
            order = np.argsort(frac, kind="stable")
        node_rack = np.empty(n, dtype=np.int64)
        node_rack[order] = np.arange(n) // net.nodes_per_rack
        n_racks = int(node_rack.max()) + 1
        # A leaf's uplink carries its nodes' line rate divided by the oversubscription.
        rack_bps = np.bincount(node_rack, weights=nic_arr, minlength=n_racks) / net.oversubscription
        rack_up = np.array([add(PS, 1, f"rack{r}/uplink", "leaf_uplink") for r in range(n_racks)])
        rack_down = np.array([add(PS, 1, f"rack{r}/downlink", "leaf_uplink")
                              for r in range(n_racks)])
        if sw.zones is None and not given_zones:  # one zone per rack, as most deployments
            dev_zone = node_rack[np.asarray(dev_node, dtype=np.int64)].tolist()
    n_dev = len(dev_node)
    part_power = sw.part_power or int(min(20, max(8, math.ceil(math.log2(n_dev * 100)))))
    ring = make_ring(spec, dev_node, dev_zone, dev_weight, part_power, dev_region)
    proxies = np.array([i for i, r in enumerate(role) if r in ("proxy", "both")], dtype=np.int64)
    stations = Stations(kind=np.asarray(kinds, dtype=np.int8),
                        servers=np.asarray(servers, dtype=np.int32), names=names)
    return ClusterModel(
        spec=spec, stations=stations, station_class=np.asarray(classes),
        node_role=np.asarray(role), node_cpu=np.asarray(cpu, dtype=np.int64),
        node_pool=np.asarray(pool, dtype=np.int64),
        node_tx=np.asarray(tx, dtype=np.int64), node_rx=np.asarray(rx, dtype=np.int64),
        node_rack=node_rack, node_cpu_scale=np.asarray(scale), node_nic_bps=nic_arr,
        rack_up=rack_up, rack_down=rack_down, rack_bps=rack_bps,
        dev_station=np.asarray(dev_station, dtype=np.int64),
        dev_bw_station=np.asarray(dev_bw, dtype=np.int64),
        dev_model=np.asarray(dev_model, dtype=np.int64), models=models, ring=ring,
        proxies=proxies, leaf_spine=leaf_spine)


# ---------------------------------------------------------------------------------------
# requests and routes
@dataclass
class Requests:
    """What each request is: operation, size, proxy node, devices (replicas) and, for a GET,
    the replica read. Drawn with one seeded generator, so a seed fixes everything."""

    op: np.ndarray        # int8
    size: np.ndarray      # int64 bytes
    proxy: np.ndarray     # node id
    devs: np.ndarray      # [n, replicas] device ids
    read_replica: np.ndarray  # int per request (GET)
    think: np.ndarray     # seconds before issuing (closed loop)
    arrivals: np.ndarray | None  # open loop arrival times
    part: np.ndarray | None = None    # partition per request
    ok: np.ndarray | None = None      # False: fails for want of live replicas (failures.py)
    drawn: "Requests | None" = None   # as drawn, before failures re-routed it (failures.py)

    def __len__(self) -> int:
        return int(self.op.size)


_PART_CACHE: dict[tuple, np.ndarray] = {}
#: Object k of the population is /AUTH_storlab/bench{k % containers}/obj{k:08d}.
OBJ_HEAD, OBJ_MID = b"/AUTH_storlab/bench", b"/obj"


def _object_partitions(ring: Ring, n_obj: int, containers: int) -> np.ndarray:
    """Partition of each object of the population; names hash exactly as Swift hashes
    /account/container/object. Cached: md5 in Python is the slow part of drawing."""
    key = (ring.part_power, ring.prefix, ring.suffix, n_obj, containers)
    if key not in _PART_CACHE:
        if len(_PART_CACHE) > 16:
            _PART_CACHE.clear()
        fast = compiled_function("numbered_partitions")
        if fast is not None and 1 <= ring.part_power <= 32:
            # The same names hashed in the compiled engine (0.2 -> 0.02 s CPU for 200,000).
            _PART_CACHE[key] = fast(ring.prefix, OBJ_HEAD, OBJ_MID, containers, 8, n_obj,
                                    ring.suffix, ring.part_power)
        else:
            # Formatted as bytes: no str to encode per name (0.26 -> 0.22 s CPU for 200,000).
            names = (OBJ_HEAD + b"%d" % (k % containers) + OBJ_MID + b"%08d" % k
                     for k in range(n_obj))
            _PART_CACHE[key] = hash_partition(names, ring.part_power, ring.prefix, ring.suffix)
    return _PART_CACHE[key]




def iter_requests(model: ClusterModel, n: int, seed: int | None = None) -> Iterator[Requests]:
    """The `n` requests of the spec's workload, DRAW_BLOCK at a time (vectorised), each
    block routed around failures (`model.extra["failures"]` then holds the block's plan)."""
    wl = model.spec.workload
    s = wl.seed if seed is None else seed
    rng = np.random.default_rng(s)
    n_obj = wl.objects
    sizes_obj = size_sampler(wl.object_size)(rng, n_obj)
    part_obj = _object_partitions(model.ring, n_obj, wl.containers)
    probs = np.array([wl.mix.get(o, 0.0) for o in OPS])
    perm: np.ndarray | None = None
    cdf = np.cumsum(1.0 / np.arange(1, n_obj + 1) ** wl.zipf_s) if wl.popularity == "zipf" else None
    t_last = 0.0
    for b, a in enumerate(range(0, n, DRAW_BLOCK)):
        m = min(DRAW_BLOCK, n - a)
        if b:
            rng = np.random.default_rng([s, 2, b])
        op = rng.choice(len(OPS), m, p=probs / probs.sum()).astype(np.int8)
        if cdf is not None:
            obj = np.searchsorted(cdf, rng.random(m) * cdf[-1], side="right")
            if perm is None:    # hot objects spread over the ring, the same in every block
                perm = rng.permutation(n_obj)
            obj = perm[np.minimum(obj, n_obj - 1)]
        else:
            obj = rng.integers(0, n_obj, m)
        proxy = model.proxies[rng.integers(0, model.proxies.size, m)]
        devs = model.ring.r2p2d[:, part_obj[obj]].T
        read_replica = rng.integers(0, model.ring.replicas, m)
        think = (rng.exponential(wl.think_ms / 1000.0, m) if wl.think_ms > 0 else np.zeros(m))
        arrivals = None
        if wl.rate is not None:
            # t_last + ...: the first block's times are exactly the plain cumsum's.
            arrivals = t_last + np.cumsum(rng.exponential(1.0 / wl.rate, m))
            t_last = float(arrivals[-1])
        yield apply_failures(model, Requests(op, sizes_obj[obj], proxy,
                                             np.ascontiguousarray(devs), read_replica, think,
                                             arrivals, part_obj[obj]), stream=b)


def concat_requests(blocks: list[Requests]) -> Requests:
    """Blocks of requests as one (every per-request field concatenated)."""
    if len(blocks) == 1:
        return blocks[0]
    kw = {}
    for f in dataclasses.fields(Requests):
        vals = [getattr(r, f.name) for r in blocks]
        if any(v is None for v in vals):
            kw[f.name] = None
        elif f.name == "drawn":      # the blocks as drawn, before failures re-routed them
            kw[f.name] = concat_requests(vals)
        else:
            kw[f.name] = np.concatenate(vals)
    return Requests(**kw)


def draw_requests(model: ClusterModel, n: int, seed: int | None = None) -> Requests:
    """Draw `n` requests of the spec's workload (vectorised; the blocks of `iter_requests`
    joined)."""
    blocks = list(iter_requests(model, n, seed))
    if len(blocks) == 1:
        return blocks[0]
    req = concat_requests(blocks)
    # The failure plan of the whole run (each block's covered only its own requests).
    model.extra["failures"] = failure_plan(model, req)
    return req
