"""The Swift-like cluster model: YAML schema, stations, and each request's concrete route.

This module knows Swift (what a PUT, GET or DELETE visits and for how long); the engine
(`storlab.sim.engine`) only knows when things happen. Routes are built for all requests at
once with numpy: a PUT is one step at its proxy (client -> proxy NIC, proxy CPU), then a fork
to every replica (proxy NIC -> [leaf links] -> storage NIC -> object-server worker -> CPU ->
disk) joined at the write quorum, the other replicas finishing in the background; a GET visits
one replica chosen at random (Swift's `sorting_method = shuffle`), then streams back through
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
Swift streams 64 KiB chunks), no container/account updates, no memcache, no failures; an
object's whole payload is one disk I/O (one positioning, then streaming); an object-server
worker serves one request at a time (no eventlet concurrency inside a worker while it waits
on a disk).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import SimError, StorlabError
from ..units import parse_size  # noqa: F401 (also this module's old name for it)
from .devices import DeviceModel, DeviceSpec, PRESETS, SMALL_IO, resolve_device
from .engine import FCFS, HOLD, PS, Routes, Stations
from .ring import Ring, hash_partition

OPS = ("PUT", "GET", "DELETE")
PUT, GET, DELETE = 0, 1, 2


# ---------------------------------------------------------------------------------------
# schema
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CpuSpec(_Strict):
    cores: int = Field(14, ge=1)
    ghz: float = Field(2.3, gt=0)
    speed: float = Field(1.0, gt=0, description="per-clock speed relative to the reference")


class DiskGroup(_Strict):
    type: str | DeviceSpec = "hdd7200"
    count: int = Field(12, ge=0)
    weight: float | None = Field(None, ge=0, description="ring weight per disk (default TB)")


class NodeGroup(_Strict):
    role: Literal["proxy", "storage", "both"]
    count: int = Field(..., ge=0)
    name: str | None = None
    cpu: CpuSpec = Field(default_factory=CpuSpec)
    nic: float = Field(10, gt=0, description="GbE")
    disks: list[DiskGroup] = Field(default_factory=list)

    @field_validator("disks", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, Mapping) else v


class Network(_Strict):
    topology: Literal["star", "leaf-spine"] = "star"
    nodes_per_rack: int = Field(20, ge=1)
    oversubscription: float = Field(3.0, ge=1.0)
    efficiency: float = Field(0.94, gt=0, le=1.0, description="payload share of line rate")
    #: spread: every rack gets its share of each node group (proxies in every rack);
    #: grouped: racks filled group after group, in file order.
    placement: Literal["spread", "grouped"] = "spread"


class OpCost(_Strict):
    base_ms: float = Field(..., ge=0)
    ms_per_mb: float = Field(0.0, ge=0)


def _default_proxy_costs() -> dict[str, OpCost]:
    return {"PUT": OpCost(base_ms=1.6, ms_per_mb=2.0), "GET": OpCost(base_ms=1.1, ms_per_mb=1.2),
            "DELETE": OpCost(base_ms=1.0)}


def _default_object_costs() -> dict[str, OpCost]:
    return {"PUT": OpCost(base_ms=1.2, ms_per_mb=3.0), "GET": OpCost(base_ms=0.8, ms_per_mb=1.5),
            "DELETE": OpCost(base_ms=0.8)}


class CpuCosts(_Strict):
    """CPU seconds per operation on one core of `ref_ghz` (Python-level Swift costs)."""

    ref_ghz: float = Field(2.3, gt=0)
    proxy: dict[Literal["PUT", "GET", "DELETE"], OpCost] = Field(default_factory=_default_proxy_costs)
    object: dict[Literal["PUT", "GET", "DELETE"], OpCost] = Field(
        default_factory=_default_object_costs)

    @model_validator(mode="after")
    def _fill(self) -> "CpuCosts":
        self.proxy = {**_default_proxy_costs(), **self.proxy}
        self.object = {**_default_object_costs(), **self.object}
        return self


class SwiftSpec(_Strict):
    proxy_workers: int | Literal["auto"] = "auto"
    object_workers: int | Literal["auto"] = "auto"
    part_power: int | None = Field(None, ge=1, le=24)
    replicas: int = Field(3, ge=1)
    write_quorum: int | None = Field(None, ge=1)
    zones: int | None = Field(None, ge=1)
    put_meta_ios: int = Field(1, ge=0, description="small writes beside the data (inode, dir)")
    get_meta_ios: int = Field(1, ge=0, description="small reads beside the data (inode)")
    delete_meta_ios: int = Field(2, ge=0, description="tombstone and directory writes")
    ring_seed: int = 0

    @field_validator("proxy_workers", "object_workers")
    @classmethod
    def _positive(cls, v: Any) -> Any:
        if v != "auto" and int(v) < 1:
            raise ValueError("must be >= 1 or 'auto'")
        return v

    @model_validator(mode="after")
    def _quorum(self) -> "SwiftSpec":
        if self.write_quorum is None:
            self.write_quorum = self.replicas // 2 + 1  # 2 of 3, as Swift's replication policy
        if self.write_quorum > self.replicas:
            raise ValueError(f"write_quorum {self.write_quorum} > replicas {self.replicas}")
        return self


class SizeDist(_Strict):
    dist: Literal["lognormal", "uniform"]
    median: Any = None
    sigma: float = Field(1.0, gt=0)
    min: Any = 1
    max: Any = None


class Workload(_Strict):
    mix: dict[Literal["PUT", "GET", "DELETE"], float] = Field(default_factory=lambda: {"GET": 1.0})
    object_size: Any = "64KiB"
    objects: int = Field(100_000, ge=1)
    containers: int = Field(100, ge=1)
    popularity: Literal["uniform", "zipf"] = "uniform"
    zipf_s: float = Field(1.0, gt=0)
    clients: int | None = Field(64, ge=1)
    think_ms: float = Field(0.0, ge=0)
    rate: float | None = Field(None, gt=0, description="open loop: requests per second")
    requests: int | None = Field(None, ge=2)
    duration: float | None = Field(None, gt=0)
    warmup: float = Field(0.05, ge=0, lt=0.9, description="share of requests left out")
    seed: int = 1

    @field_validator("mix", mode="before")
    @classmethod
    def _mix(cls, v: Any) -> Any:
        if isinstance(v, str):  # "PUT:0.2,GET:0.8" from the command line
            try:
                return {k.strip().upper(): float(x) for k, x in
                        (p.split(":") for p in v.split(",") if p.strip())}
            except ValueError:
                raise ValueError(f"mix {v!r} is not OP:share,OP:share") from None
        if isinstance(v, Mapping):
            return {str(k).upper(): x for k, x in v.items()}
        return v

    @model_validator(mode="after")
    def _check(self) -> "Workload":
        if any(x < 0 for x in self.mix.values()) or sum(self.mix.values()) <= 0:
            raise ValueError("mix shares must be >= 0 with a positive sum")
        if self.rate is not None:
            self.clients = None
        if self.requests is None and self.duration is None:
            self.requests = 100_000
        _size_sampler(self.object_size)  # validate now, not mid-run
        return self


class Calibration(_Strict):
    """Multipliers fitted by `storlab simulate --calibrate` on every disk's per-I/O overhead
    and bandwidth (CPU costs are fitted in `cpu_cost` itself)."""

    disk_overhead: float = Field(1.0, gt=0)
    disk_bandwidth: float = Field(1.0, gt=0)


class ClusterSpec(_Strict):
    name: str = "cluster"
    nodes: list[NodeGroup]
    network: Network = Field(default_factory=Network)
    devices: dict[str, DeviceSpec] = Field(default_factory=dict)
    cpu_cost: CpuCosts = Field(default_factory=CpuCosts)
    swift: SwiftSpec = Field(default_factory=SwiftSpec)
    workload: Workload = Field(default_factory=Workload)
    calibration: Calibration = Field(default_factory=lambda: Calibration())
    #: deterministic: a visit takes exactly its demand; exponential: demand x Exp(1), which
    #: makes FCFS stations product-form (used to check the simulator against exact MVA).
    service_times: Literal["deterministic", "exponential"] = "deterministic"

    @model_validator(mode="after")
    def _check(self) -> "ClusterSpec":
        for g in self.nodes:
            for d in g.disks:
                if isinstance(d.type, str) and d.type not in self.devices and d.type not in PRESETS:
                    raise ValueError(f"disk type {d.type!r} is neither a preset "
                                     f"({', '.join(sorted(PRESETS))}) nor under devices:")
        if not any(g.count and g.role in ("proxy", "both") for g in self.nodes):
            raise ValueError("no proxy node (role proxy or both)")
        if not any(g.count and g.role in ("storage", "both") and any(d.count for d in g.disks)
                   for g in self.nodes):
            raise ValueError("no storage node with disks (role storage or both)")
        return self


# ---------------------------------------------------------------------------------------
# loading and overrides
def _format_validation(exc: ValidationError, source: str) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or "(top)"
    msg = err.get("msg", "invalid").removeprefix("Value error, ")
    inp = err.get("input")
    shown = "" if isinstance(inp, (dict, list)) else f" (got {inp!r})"
    more = f" [+{len(exc.errors()) - 1} more]" if len(exc.errors()) > 1 else ""
    return f"{source}: {loc}: {msg}{shown}{more}"


def load_raw(path: str | Path) -> dict[str, Any]:
    """The cluster YAML as a plain dict (overrides are applied to this)."""
    from ..fileio import read_yaml

    p = Path(path)
    try:
        data = read_yaml(p)
    except SimError:
        raise
    except StorlabError as exc:  # missing, binary, bad YAML (with its line)
        raise SimError(str(exc)) from None
    if not isinstance(data, dict):
        raise SimError(f"{p}: top level must be a mapping with nodes:, swift:, workload:")
    return data


def parse_cluster(data: Mapping[str, Any], source: str = "cluster") -> ClusterSpec:
    """Validate a cluster dict; errors become one-line SimErrors naming source and field."""
    try:
        return ClusterSpec.model_validate(dict(data))
    except ValidationError as exc:
        raise SimError(_format_validation(exc, source)) from None


def load_cluster(path: str | Path, overrides: Mapping[str, Any] | None = None) -> ClusterSpec:
    raw = load_raw(path)
    if overrides:
        raw = apply_overrides(raw, overrides, source=str(path))
    return parse_cluster(raw, str(path))


#: Short override names -> what they set. "storage" means every group holding disks.
SHORT_KEYS: dict[str, str] = {
    "nodes": "storage.count", "storage_nodes": "storage.count", "proxies": "proxy.count",
    "disk": "storage.disks.type", "disks": "storage.disks.count",
    "nic": "*.nic", "cores": "*.cpu.cores", "ghz": "*.cpu.ghz", "cpu_speed": "*.cpu.speed",
    "proxy_workers": "swift.proxy_workers", "object_workers": "swift.object_workers",
    "part_power": "swift.part_power", "replicas": "swift.replicas",
    "write_quorum": "swift.write_quorum", "zones": "swift.zones",
    "clients": "workload.clients", "rate": "workload.rate", "object_size": "workload.object_size",
    "requests": "workload.requests", "duration": "workload.duration",
    "think_ms": "workload.think_ms", "mix": "workload.mix", "seed": "workload.seed",
    "objects": "workload.objects", "topology": "network.topology",
    "oversubscription": "network.oversubscription",
}
_ROLE_SELECT = {"proxy": ("proxy",), "storage": ("storage", "both"), "both": ("both",),
                "*": ("proxy", "storage", "both")}


def _coerce(value: Any) -> Any:
    """Strings from the command line become numbers when they look like numbers."""
    if isinstance(value, str):
        s = value.strip()
        if s.lower() in ("null", "none"):
            return None
        for conv in (int, float):
            try:
                return conv(s)
            except ValueError:
                pass
    return value


def apply_overrides(raw: Mapping[str, Any], overrides: Mapping[str, Any],
                    source: str = "cluster") -> dict[str, Any]:
    """A copy of the raw cluster dict with `overrides` set. Keys are short names
    (`SHORT_KEYS`), dotted paths into sections (`swift.replicas`, `workload.mix.GET`), or a
    role then a path (`storage.disks.count`, `proxy.cpu.cores`, `*.nic`) applied to every
    node group of that role (and every disk group below it)."""
    out = copy.deepcopy(dict(raw))
    for key, value in overrides.items():
        path = SHORT_KEYS.get(str(key), str(key)).split(".")
        value = _coerce(value)
        head = path[0]
        if head in _ROLE_SELECT:
            groups = [g for g in out.get("nodes") or [] if isinstance(g, dict)
                      and g.get("role") in _ROLE_SELECT[head]]
            if head == "storage":
                groups = [g for g in groups if g.get("disks")]
            if not groups:
                raise SimError(f"{source}: override {key}={value!r}: no node group with role "
                               f"{head!r}")
            if len(path) < 2:
                raise SimError(f"{source}: override {key}: name a field after {head!r}")
            for g in groups:
                if path[1] == "disks":
                    disks = g.get("disks")
                    disks = [disks] if isinstance(disks, dict) else disks
                    g["disks"] = [dict(d) for d in disks]
                    for d in g["disks"]:
                        _set_path(d, path[2:], value, key, source)
                else:
                    _set_path(g, path[1:], value, key, source)
        else:
            _set_path(out, path, value, key, source)
    return out


def _set_path(d: dict[str, Any], path: list[str], value: Any, key: Any, source: str) -> None:
    if not path:
        raise SimError(f"{source}: override {key}: empty field path")
    for p in path[:-1]:
        nxt = d.get(p)
        if nxt is None:
            nxt = d[p] = {}
        if not isinstance(nxt, dict):
            raise SimError(f"{source}: override {key}: {p} is not a section")
        d = nxt
    d[path[-1]] = value


# ---------------------------------------------------------------------------------------
# object sizes
def _size_sampler(spec: Any):
    """A function rng, n -> sizes (int64 bytes) for a fixed size, classes or a distribution."""
    if isinstance(spec, Mapping) and "dist" in spec:
        d = SizeDist.model_validate(dict(spec))
        lo = parse_size(d.min)
        hi = parse_size(d.max) if d.max is not None else None
        if d.dist == "uniform":
            if hi is None or hi < lo:
                raise ValueError("uniform object_size needs min <= max")
            return lambda rng, n: rng.integers(lo, hi + 1, n)
        med = parse_size(d.median if d.median is not None else "64KiB")

        def lognormal(rng: np.random.Generator, n: int) -> np.ndarray:
            x = np.exp(rng.normal(math.log(med), d.sigma, n))
            return np.clip(np.round(x), lo, hi if hi is not None else np.inf).astype(np.int64)
        return lognormal
    if isinstance(spec, Mapping):  # classes: {16KiB: 0.8, 16MiB: 0.2}
        sizes = np.array([parse_size(k) for k in spec], dtype=np.int64)
        w = np.array([float(v) for v in spec.values()])
        if np.any(w < 0) or w.sum() <= 0:
            raise ValueError("object_size class shares must be >= 0 with a positive sum")
        p = w / w.sum()
        return lambda rng, n: sizes[rng.choice(sizes.size, n, p=p)]
    size = parse_size(spec)
    return lambda rng, n: np.full(n, size, dtype=np.int64)


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
        if sw.zones is None:  # one zone per rack, as most Swift deployments do
            dev_zone = node_rack[np.asarray(dev_node, dtype=np.int64)].tolist()
    n_dev = len(dev_node)
    part_power = sw.part_power or int(min(20, max(8, math.ceil(math.log2(n_dev * 100)))))
    try:
        ring = Ring.build(dev_node, dev_zone, dev_weight, part_power, sw.replicas, sw.ring_seed)
    except ValueError as exc:
        raise SimError(f"ring: {exc}") from None
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

    def __len__(self) -> int:
        return int(self.op.size)


_PART_CACHE: dict[tuple, np.ndarray] = {}


def _object_partitions(ring: Ring, n_obj: int, containers: int) -> np.ndarray:
    """Partition of each object of the population; names hash exactly as Swift hashes
    /account/container/object. Cached: md5 in Python is the slow part of drawing."""
    key = (ring.part_power, ring.prefix, ring.suffix, n_obj, containers)
    if key not in _PART_CACHE:
        if len(_PART_CACHE) > 16:
            _PART_CACHE.clear()
        names = (f"/AUTH_storlab/bench{k % containers}/obj{k:08d}" for k in range(n_obj))
        _PART_CACHE[key] = hash_partition(names, ring.part_power, ring.prefix, ring.suffix)
    return _PART_CACHE[key]


def draw_requests(model: ClusterModel, n: int, seed: int | None = None) -> Requests:
    """Draw `n` requests of the spec's workload (vectorised)."""
    wl = model.spec.workload
    rng = np.random.default_rng(wl.seed if seed is None else seed)
    n_obj = wl.objects
    sizes_obj = _size_sampler(wl.object_size)(rng, n_obj)
    part_obj = _object_partitions(model.ring, n_obj, wl.containers)
    probs = np.array([wl.mix.get(o, 0.0) for o in OPS])
    op = rng.choice(len(OPS), n, p=probs / probs.sum()).astype(np.int8)
    if wl.popularity == "zipf":
        cdf = np.cumsum(1.0 / np.arange(1, n_obj + 1) ** wl.zipf_s)
        obj = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
        obj = rng.permutation(n_obj)[np.minimum(obj, n_obj - 1)]  # hot objects spread over the ring
    else:
        obj = rng.integers(0, n_obj, n)
    proxy = model.proxies[rng.integers(0, model.proxies.size, n)]
    devs = model.ring.r2p2d[:, part_obj[obj]].T
    read_replica = rng.integers(0, model.ring.replicas, n)
    think = (rng.exponential(wl.think_ms / 1000.0, n) if wl.think_ms > 0 else np.zeros(n))
    arrivals = None
    if wl.rate is not None:
        arrivals = np.cumsum(rng.exponential(1.0 / wl.rate, n))
    return Requests(op, sizes_obj[obj], proxy, np.ascontiguousarray(devs), read_replica,
                    think, arrivals)


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
            t.step(int(sw.write_quorum or 1))  # DELETE uses the same quorum as PUT
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


def build_routes(model: ClusterModel, req: Requests) -> Routes:
    """Flatten every op's dense template into the engine's CSR routes, in request order."""
    n = len(req)
    temps = _route_templates(model, req)
    n_steps = np.zeros(n, dtype=np.int64)
    for code, (idx, t) in temps.items():
        n_steps[idx] = len(t.step_quorum)
    step_ptr = np.concatenate(([0], np.cumsum(n_steps)))
    total_steps = int(step_ptr[-1])
    branches_per_step = np.zeros(total_steps, dtype=np.int64)
    quorum = np.zeros(total_steps, dtype=np.int32)
    for code, (idx, t) in temps.items():
        bps = np.bincount(np.asarray(t.branch_step), minlength=len(t.step_quorum))
        sid = step_ptr[idx][:, None] + np.arange(len(t.step_quorum))
        branches_per_step[sid] = bps
        quorum[sid] = np.asarray(t.step_quorum, dtype=np.int32)
    branch_ptr = np.concatenate(([0], np.cumsum(branches_per_step)))
    total_branches = int(branch_ptr[-1])
    visits_per_branch = np.zeros(total_branches, dtype=np.int64)
    dense: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for code, (idx, t) in temps.items():
        on = np.stack(t.cols_on, axis=1)
        slot_branch = np.asarray(t.slot_branch)
        starts = np.flatnonzero(np.r_[True, slot_branch[1:] != slot_branch[:-1]])
        counts = np.add.reduceat(on.astype(np.int64), starts, axis=1)
        if np.any(counts == 0):
            raise AssertionError("a route branch has no visit")
        first_branch = branch_ptr[step_ptr[idx]]
        visits_per_branch[first_branch[:, None] + np.arange(counts.shape[1])] = counts
        dense[code] = (idx, on, np.stack(t.cols_st, axis=1), np.stack(t.cols_dem, axis=1))
    visit_ptr = np.concatenate(([0], np.cumsum(visits_per_branch)))
    total_visits = int(visit_ptr[-1])
    station = np.empty(total_visits, dtype=np.int32)
    demand = np.empty(total_visits, dtype=np.float64)
    for code, (idx, on, st, dem) in dense.items():
        first_visit = visit_ptr[branch_ptr[step_ptr[idx]]]
        # A request's visits are contiguous and in slot order, so position = first + rank.
        pos = first_visit[:, None] + np.cumsum(on, axis=1) - 1
        station[pos[on]] = st[on]
        demand[pos[on]] = dem[on]
    return Routes(step_ptr=step_ptr, branch_ptr=branch_ptr, quorum=quorum, visit_ptr=visit_ptr,
                  station=station, demand=demand, op=req.op.astype(np.int8))


# ---------------------------------------------------------------------------------------
# running and reporting
#: Resource classes that are token pools (HOLD), not hardware: their utilisation is the share
#: of workers taken, which includes the time spent waiting on the hardware they cover.
POOL_CLASSES = ("object_workers",)


def pick_bottleneck(util: Any) -> dict[str, Any]:
    """The busiest hardware resource of a utilisation table (pools are not candidates: a
    worker pool is busy whenever the disks it waits on are)."""
    hw = util[~util["resource"].isin(POOL_CLASSES)]
    top = (hw if len(hw) else util).iloc[0]
    return {"resource": top["resource"], "station": top["busiest"],
            "utilisation": float(top["max"])}


def flat_metrics(ops: Any, util: Any, bottleneck: dict[str, Any],
                 keys: tuple[str, ...]) -> dict[str, float]:
    """One flat dict of a result's per-operation `keys` (prefixed get_/put_/..., none for
    ALL), the highest utilisation of each resource class and the bottleneck's."""
    out: dict[str, float] = {}
    for row in ops.to_dict("records"):
        pre = "" if row["op"] == "ALL" else f"{row['op'].lower()}_"
        for k in keys:
            out[f"{pre}{k}"] = float(row[k])
    for row in util.to_dict("records"):
        out[f"util_{row['resource']}"] = float(row["max"])
    out["bottleneck_util"] = float(bottleneck["utilisation"])
    return out


@dataclass
class SimReport:
    """One simulated run: per-op throughput and latency, per-resource utilisation, the
    bottleneck, Little's-law check, and the cost of simulating it."""

    name: str
    loop: str                      # "closed" | "open"
    requests: int
    ops: Any                       # DataFrame: op, count, ops_s, mb_s, lat_* (ms)
    util: Any                      # DataFrame: resource, stations, mean, max, busiest
    bottleneck: dict[str, Any]
    littles_law_error: float       # |L - X R| / L over all stations together
    station_littles_error: float   # worst station with >= 1000 visits
    events: int
    sim_time: float
    wall: float                    # engine seconds
    build_wall: float              # route building seconds
    notes: list[str] = field(default_factory=list)

    def table(self):
        return self.ops

    def metrics(self) -> dict[str, float]:
        """Flat numbers for campaigns: totals, per-op latency, utilisation per resource."""
        return flat_metrics(self.ops, self.util, self.bottleneck,
                            ("ops_s", "mb_s", "lat_mean_ms", "lat_p50_ms", "lat_p95_ms",
                             "lat_p99_ms"))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "loop": self.loop, "requests": self.requests,
                "ops": self.ops, "utilisation": self.util, "bottleneck": self.bottleneck,
                "littles_law_error": self.littles_law_error,
                "station_littles_error": self.station_littles_error,
                "events": self.events, "sim_time_s": self.sim_time, "engine_wall_s": self.wall,
                "build_wall_s": self.build_wall, "notes": self.notes}


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
    t0 = _time.perf_counter()
    req = draw_requests(model, n)
    routes = build_routes(model, req)
    if model.spec.service_times == "exponential":
        rng = np.random.default_rng([wl.seed, 1])
        routes.demand *= rng.exponential(1.0, routes.demand.size)
    build_wall = _time.perf_counter() - t0
    warm = min(int(wl.warmup * n), n - 1)
    notes: list[str] = []
    kwargs: dict[str, Any] = {"warmup": warm}
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
    return summarise(model, req, res, build_wall, notes)


def summarise(model: ClusterModel, req: Requests, res: Any, build_wall: float = 0.0,
              notes: list[str] | None = None) -> SimReport:
    import pandas as pd

    m = np.zeros(len(req), dtype=bool)
    m[res.warmup:] = True
    lat = res.finish - res.start
    span = float(res.finish[m].max()) - res.stats_start
    rows = []
    for code, name in [(None, "ALL"), *enumerate(OPS)]:
        sel = m if code is None else m & (req.op == code)
        k = int(sel.sum())
        if k == 0:
            continue
        la = lat[sel] * 1e3
        rows.append({"op": name, "count": k, "ops_s": k / span,
                     "mb_s": float(req.size[sel].sum()) / span / 1e6 if code != DELETE else 0.0,
                     "lat_mean_ms": float(la.mean()),
                     "lat_p50_ms": float(np.percentile(la, 50)),
                     "lat_p95_ms": float(np.percentile(la, 95)),
                     "lat_p99_ms": float(np.percentile(la, 99))})
    if code_all := [r for r in rows if r["op"] == "ALL"]:
        code_all[0]["mb_s"] = sum(r["mb_s"] for r in rows if r["op"] != "ALL")
    ops = pd.DataFrame(rows)
    u = res.utilisation()
    names = model.stations.names or [str(i) for i in range(u.size)]
    urows = []
    for cls in model.classes():
        idx = np.flatnonzero(model.station_class == cls)
        j = idx[np.argmax(u[idx])]
        urows.append({"resource": cls, "stations": idx.size, "mean": float(u[idx].mean()),
                      "max": float(u[j]), "busiest": names[j]})
    util = pd.DataFrame(urows).sort_values("max", ascending=False, ignore_index=True)
    bottleneck = pick_bottleneck(util)
    notes = list(notes or [])
    pools = util[util["resource"].isin(POOL_CLASSES)]
    if len(pools) and float(pools["max"].iloc[0]) > 0.95:
        notes.append(f"object-server workers busy {float(pools['max'].iloc[0]):.0%} "
                     f"({pools['busiest'].iloc[0]}): requests wait for a worker; more "
                     "object_workers may help")
    # Little's law from the engine's own integrals: time-average number present (area)
    # against throughput x residence (sum of completed visit times), over all stations and
    # per station. Only boundary effects (visits in progress when the window opens) remain.
    ll = abs(float(res.area.sum()) - float(res.residence.sum())) / max(float(res.area.sum()),
                                                                         1e-300)
    busy_st = res.completions >= 1000
    if busy_st.any():
        Ls = res.area[busy_st]
        st_err = float(np.max(np.abs(Ls - res.residence[busy_st]) / np.maximum(Ls, 1e-300)))
    else:
        st_err = 0.0
    return SimReport(name=model.spec.name, loop="open" if req.arrivals is not None else "closed",
                     requests=len(req), ops=ops, util=util, bottleneck=bottleneck,
                     littles_law_error=ll, station_littles_error=st_err, events=res.events,
                     sim_time=res.sim_time, wall=res.wall, build_wall=build_wall,
                     notes=notes)
