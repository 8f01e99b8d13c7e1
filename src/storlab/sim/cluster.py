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
Swift streams 64 KiB chunks), no container/account updates, no memcache, failures as
`storlab.sim.failures` models them; an
object's whole payload is one disk I/O (one positioning, then streaming); an object-server
worker serves one request at a time (no eventlet concurrency inside a worker while it waits
on a disk).
"""

from __future__ import annotations

import copy
import dataclasses
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
from .failures import Failure, add_availability, adjust_routes, apply_failures
from .ops import DELETE, GET, OPS, PUT  # re-exported: callers import them from here
from .ringfile import make_ring, resolve_ring_file


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


class RingSpec(_Strict):
    """Where the object ring comes from and how paths hash (see `storlab.sim.ring`)."""

    #: a ring file written by swift-ring-builder (object.ring.gz); relative to the cluster file
    file: str | None = None
    #: swift.conf's swift_hash_path_prefix/suffix (storlab's historical default suffix)
    hash_path_prefix: str = ""
    hash_path_suffix: str = "storlab"
    #: built rings: swift = Swift's builder exactly, fast = its counts and dispersion, vectorised
    placement: Literal["auto", "swift", "fast"] = "auto"
    overload: float = Field(0.0, ge=0, description="Swift's builder overload (0.1 = 10 %)")


class ClusterSpec(_Strict):
    name: str = "cluster"
    nodes: list[NodeGroup]
    network: Network = Field(default_factory=Network)
    devices: dict[str, DeviceSpec] = Field(default_factory=dict)
    cpu_cost: CpuCosts = Field(default_factory=CpuCosts)
    swift: SwiftSpec = Field(default_factory=SwiftSpec)
    workload: Workload = Field(default_factory=Workload)
    calibration: Calibration = Field(default_factory=lambda: Calibration())
    ring: RingSpec = Field(default_factory=RingSpec)
    #: failed devices / nodes for the whole run (see storlab.sim.failures)
    failures: list[Failure] = Field(default_factory=list)
    failed_disks: int = Field(0, ge=0, description="shortcut: the first disk of N nodes")
    failed_nodes: int = Field(0, ge=0, description="shortcut: the first N storage nodes")
    rebuild_mb_s: float = Field(0.0, ge=0, description="rebuild traffic per surviving disk")
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
    resolve_ring_file(data, p.parent)
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
    ring = make_ring(spec, dev_node, dev_zone, dev_weight, part_power)
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
    return apply_failures(model, Requests(op, sizes_obj[obj], proxy, np.ascontiguousarray(devs),
                                          read_replica, think, arrivals, part_obj[obj]))


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


#: Requests per chunk of route building: bounds the dense temporaries (requests x slots)
#: whatever the run's length, so memory grows only with the routes themselves.
ROUTE_CHUNK = 1 << 16


def _req_slice(req: Requests, a: int, b: int) -> Requests:
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
    parts = [_routes_chunk(model, _req_slice(req, a, min(a + chunk, n)))
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


# ---------------------------------------------------------------------------------------
# running and reporting
#: Resource classes that are token pools (HOLD), not hardware: their utilisation is the share
#: of workers taken, which includes the time spent waiting on the hardware they cover.
POOL_CLASSES = ("object_workers",)


def pick_bottleneck(util: Any) -> dict[str, Any]:
    """The busiest resource of a utilisation table. A worker pool counts: when its workers are
    all taken while the disks behind them are not, the pool is what binds (too few workers).
    When hardware is within 10 points of the busiest pool, the hardware is named: the pool is
    then busy mostly because it waits on that nearly saturated hardware."""
    top = util.sort_values("max", ascending=False, kind="stable").iloc[0]
    if top["resource"] in POOL_CLASSES:
        hw = util[~util["resource"].isin(POOL_CLASSES)]
        if len(hw) and float(hw["max"].max()) >= float(top["max"]) - 0.10:
            top = hw.sort_values("max", ascending=False, kind="stable").iloc[0]
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
    """One simulated run: per-op throughput and latency over the steady-state window (with
    batch-means 95 % confidence intervals), per-resource utilisation over the same window,
    the bottleneck, Little's-law checks, a time series, and the cost of simulating it."""

    name: str
    loop: str                      # "closed" | "open"
    requests: int                  # simulated, warm-up and drain included
    ops: Any                       # DataFrame: op, count, ops_s, mb_s, lat_* (ms), *_ci95
    util: Any                      # DataFrame: resource, stations, mean, max, busiest
    bottleneck: dict[str, Any]
    littles_law_error: float       # engine bookkeeping: |L - X R| / L over all stations
    station_littles_error: float   # worst station with >= 1000 visits
    events: int
    sim_time: float
    wall: float                    # engine seconds
    build_wall: float              # route building seconds
    notes: list[str] = field(default_factory=list)
    #: The measured window: from/to (s), seconds, requests counted, warm-up requests and
    #: drain seconds left out, batches used for the confidence intervals.
    window: dict[str, Any] = field(default_factory=dict)
    #: |L - X R| / L of the requests in the window (L: mean number in the system; closed
    #: loop without think time, L is the number of clients).
    littles_law_system: float = float("nan")
    timeseries: Any = None         # DataFrame: per interval t_from, t_to, phase, ops_s, ...

    def table(self):
        return self.ops

    def metrics(self) -> dict[str, float]:
        """Flat numbers for campaigns: totals, per-op latency, utilisation per resource."""
        return flat_metrics(self.ops, self.util, self.bottleneck,
                            ("ops_s", "mb_s", "lat_mean_ms", "lat_p50_ms", "lat_p95_ms",
                             "lat_p99_ms"))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "loop": self.loop, "requests": self.requests,
                "window": self.window, "ops": self.ops, "utilisation": self.util,
                "bottleneck": self.bottleneck, "littles_law_system": self.littles_law_system,
                "littles_law_error": self.littles_law_error,
                "station_littles_error": self.station_littles_error,
                "events": self.events, "sim_time_s": self.sim_time, "engine_wall_s": self.wall,
                "build_wall_s": self.build_wall, "notes": self.notes,
                "timeseries": self.timeseries}

    def plot(self):
        """Throughput, mean latency and the busiest station of each resource class per
        interval; the warm-up and drain left out of the figures are shaded."""
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        ts = self.timeseries
        mid = (ts["t_from"] + ts["t_to"]) / 2
        fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
        axes[0].plot(mid, ts["ops_s"], marker="o", ms=3, color="C0")
        axes[0].axhline(float(self.ops["ops_s"].iloc[0]), color="C0", ls="--", lw=1,
                        label="steady-state mean")
        axes[0].set_ylabel("throughput (requests/s)")
        axes[1].plot(mid, ts["lat_mean_ms"], marker="o", ms=3, color="C1")
        axes[1].axhline(float(self.ops["lat_mean_ms"].iloc[0]), color="C1", ls="--", lw=1,
                        label="steady-state mean")
        axes[1].set_ylabel("mean latency (ms)")
        for k, col in enumerate(c for c in ts.columns if c.startswith("util_")):
            axes[2].plot(mid, ts[col] * 100, marker="o", ms=3, color=f"C{k + 2}",
                         label=col.removeprefix("util_").replace("_", " "))
        axes[2].set_ylabel("busiest station (% busy)")
        axes[2].set_ylim(0, 105)
        axes[2].set_xlabel("simulated time (s)")
        axes[2].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        w = self.window
        for ax in axes:
            ax.grid(alpha=0.3)
            ax.axvspan(float(ts["t_from"].iloc[0]), w["from_s"], color="0.85", lw=0)
            ax.axvspan(w["to_s"], float(ts["t_to"].iloc[-1]), color="0.85", lw=0)
        axes[0].legend(fontsize=8, loc="lower right")
        axes[0].set_title(f"{self.name}: {self.loop} loop, {self.requests:,} requests; "
                          "shaded: warm-up and drain (not measured)", fontsize=10)
        fig.tight_layout()
        return fig


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


#: Intervals the engine snapshots a run into (its time series), and batches of the
#: steady-state window for the batch-means confidence intervals.
INTERVALS = 100
BATCHES = 20


def window_marks(n: int, intervals: int = INTERVALS) -> np.ndarray:
    """Arrival counts at which the engine snapshots its stations: `intervals` equal shares
    of the arrivals, the last one at the last arrival (where the drain begins)."""
    k = max(1, min(intervals, n - 1))
    return np.unique(np.round(np.linspace(0, max(n - 1, 0), k + 1)).astype(np.int64))


def mser(x: np.ndarray) -> int:
    """MSER truncation point of a series of interval means (White 1997): the d that
    minimises the squared standard error of the mean of x[d:], searched in the first half."""
    x = np.asarray(x, dtype=float)
    if not np.any(np.isfinite(x)):
        return 0
    x = np.where(np.isfinite(x), x, np.nanmean(x))  # an interval with no finish: its mean
    k = x.size
    if k < 4:
        return 0
    tail = x[::-1]
    cnt = np.arange(1, k + 1)
    mean = np.cumsum(tail) / cnt
    var = np.cumsum(tail**2) / cnt - mean**2
    stat = (var / cnt)[::-1]  # stat[d]: over x[d:], k - d values
    return int(np.argmin(stat[: k // 2 + 1]))


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


#: Student's t 97.5 % quantiles for 1..30 degrees of freedom (a table: importing
#: scipy.stats costs about a second, more than summarising a run).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def _t95(dof: int) -> float:
    """Two-sided 95 % Student's t quantile (within 0.1 % beyond the table)."""
    if dof < 1:
        return float("nan")
    return _T975[dof - 1] if dof <= len(_T975) else 1.959964 + 2.4 / dof


def summarise(model: ClusterModel, req: Requests, res: Any, build_wall: float = 0.0,
              notes: list[str] | None = None) -> SimReport:
    """Statistics over the steady-state window: from the warm-up's last arrival to the run's
    last arrival (after it, the population drains: in closed loop fewer clients remain).
    Throughput counts the requests that finish inside the window; latencies are theirs;
    utilisations come from the engine's snapshots at the window's edges. Without snapshots
    (`marks` not given to the engine) the window runs from the warm-up to the last finish."""
    import pandas as pd

    lat = res.finish - res.start
    closed = req.arrivals is None
    # The engine adds a last snapshot at the end of the run to the marked ones.
    snap_t = np.asarray(getattr(res, "snap_t", np.zeros(0)))[:-1]
    warm_rule = f"the first {res.warmup:,} requests (workload.warmup)"
    if snap_t.size >= 2:
        marks = window_marks(len(req))
        marks = marks if marks.size == snap_t.size else np.linspace(0, len(req) - 1,
                                                                    snap_t.size)
        # The window opens after the configured warm-up share, later when MSER finds the
        # interval series of throughput or latency still drifting (a slow transient).
        x, r = _interval_means(res, lat, snap_t)
        d_cfg = int(np.searchsorted(marks, res.warmup))
        d_mser = max(mser(x), mser(r))
        first = min(max(d_cfg, d_mser), snap_t.size - 2)
        if d_mser > d_cfg:
            warm_rule = (f"the first {int(marks[first]):,} requests (MSER: throughput or "
                         f"latency still drifting after workload.warmup's {res.warmup:,})")
        else:
            warm_rule = f"the first {int(marks[first]):,} requests (workload.warmup)"
        warm_req = int(marks[first])
        edges = snap_t[first:]
        t0, t1 = float(edges[0]), float(edges[-1])
        # Batches: consecutive intervals grouped into at most BATCHES.
        groups = np.array_split(np.arange(edges.size - 1), min(BATCHES, edges.size - 1))
        bedges = np.array([edges[g[0]] for g in groups] + [edges[-1]])
    else:
        t0 = res.stats_start
        t1 = float(res.finish[res.warmup:].max())
        bedges = np.array([t0, t1])
        first = None
        warm_req = int(res.warmup)
    if t1 <= t0:  # a degenerate run (all arrivals at once): count every finish after t0
        t1 = float(res.finish.max())
        bedges = np.array([t0, t1])
    m = (res.finish >= t0) & (res.finish < t1) if first is not None else (
        np.arange(len(req)) >= res.warmup)
    if req.ok is not None:
        m &= req.ok                 # failed requests: availability, not throughput
    span = t1 - t0
    # Batch means: per batch, the throughput and the mean latency of the requests that
    # finish in it; the spread of the batch means gives the confidence interval.
    batch = np.clip(np.searchsorted(bedges, res.finish, side="right") - 1, 0, None)
    nb = bedges.size - 1
    blen = np.diff(bedges)
    rows = []
    for code, name in [(None, "ALL"), *enumerate(OPS)]:
        sel = m if code is None else m & (req.op == code)
        k = int(sel.sum())
        if k == 0:
            continue
        la = lat[sel] * 1e3
        row = {"op": name, "count": k, "ops_s": k / span,
               "mb_s": float(req.size[sel].sum()) / span / 1e6 if code != DELETE else 0.0,
               "lat_mean_ms": float(la.mean()),
               "lat_p50_ms": float(np.percentile(la, 50)),
               "lat_p95_ms": float(np.percentile(la, 95)),
               "lat_p99_ms": float(np.percentile(la, 99))}
        if nb >= 2:
            bi = batch[sel]
            cnt = np.bincount(bi, minlength=nb)[:nb]
            xb = cnt / blen
            lb = np.bincount(bi, weights=la, minlength=nb)[:nb]
            ok = cnt > 0
            rb = lb[ok] / cnt[ok]
            row["ops_s_ci95"] = _t95(nb - 1) * float(np.std(xb, ddof=1)) / math.sqrt(nb)
            row["lat_mean_ci95_ms"] = (_t95(rb.size - 1) * float(np.std(rb, ddof=1))
                                       / math.sqrt(rb.size) if rb.size >= 2 else float("nan"))
        rows.append(row)
    if code_all := [r for r in rows if r["op"] == "ALL"]:
        code_all[0]["mb_s"] = sum(r["mb_s"] for r in rows if r["op"] != "ALL")
    ops = pd.DataFrame(rows)
    names = model.stations.names or [str(i) for i in range(len(model.stations))]
    servers = np.asarray(res.servers, dtype=float)
    if first is not None:
        u = (res.snap_busy[-2] - res.snap_busy[first]) / (servers * span)
    else:
        u = res.utilisation()
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
    # The system's Little's law over the window: L (time-average requests in the system,
    # from each request's overlap with the window) against X x R of the counted requests.
    overlap = np.clip(np.minimum(res.finish, t1) - np.maximum(res.start, t0), 0.0, None)
    L = float(overlap.sum()) / span
    X = float(m.sum()) / span
    R = float(lat[m].mean()) if m.any() else 0.0
    ll_sys = abs(L - X * R) / L if L > 0 else float("nan")
    if ll_sys > 0.02:
        notes.append(f"Little's law over the window is off by {ll_sys:.1%}: latency drifts "
                     "slowly against the window's length; simulate more requests")
    window = {"from_s": t0, "to_s": t1, "seconds": span, "requests": int(m.sum()),
              "warmup_requests": warm_req, "warmup_rule": warm_rule,
              "drain_s": float(res.sim_time) - t1, "batches": int(nb),
              "rule": ("requests finishing between the warm-up's last arrival and the run's "
                       "last arrival (after it the population drains)") if first is not None
              else "requests after the warm-up, to the last finish (no engine snapshots)"}
    ts = _timeseries(model, req, res, lat, t0, t1) if first is not None else None
    return SimReport(name=model.spec.name, loop="closed" if closed else "open",
                     requests=len(req), ops=ops, util=util, bottleneck=bottleneck,
                     littles_law_error=ll, station_littles_error=st_err, events=res.events,
                     sim_time=res.sim_time, wall=res.wall, build_wall=build_wall,
                     notes=notes, window=window, littles_law_system=ll_sys, timeseries=ts)


def _interval_means(res: Any, lat: np.ndarray, edges: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Throughput and mean latency of the requests finishing in each interval."""
    nb = edges.size - 1
    b = np.searchsorted(edges, res.finish, side="right") - 1
    ok = (b >= 0) & (b < nb)
    cnt = np.bincount(b[ok], minlength=nb)[:nb]
    ls = np.bincount(b[ok], weights=lat[ok], minlength=nb)[:nb]
    with np.errstate(invalid="ignore", divide="ignore"):
        return cnt / np.diff(edges), np.where(cnt > 0, ls / np.maximum(cnt, 1), np.nan)


def _timeseries(model: ClusterModel, req: Requests, res: Any, lat: np.ndarray, t0: float,
                t1: float) -> Any:
    """Per interval between snapshots (then the drain, to the last event): throughput and
    mean latency of the requests finishing in it, and each resource class's busiest
    station's utilisation."""
    import pandas as pd

    edges, busy = res.snap_t, res.snap_busy
    keep = np.flatnonzero(np.diff(edges) > 0)
    nb = edges.size - 1
    b = np.searchsorted(edges, res.finish, side="right") - 1
    b = np.where(res.finish == edges[-1], nb - 1, b)
    ok = (b >= 0) & (b < nb)
    cnt = np.bincount(b[ok], minlength=nb)[:nb]
    ls = np.bincount(b[ok], weights=lat[ok], minlength=nb)[:nb]
    dt = np.diff(edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {"t_from": edges[:-1], "t_to": edges[1:],
               "phase": np.where(edges[1:] <= t0 + 1e-12, "warmup",
                                 np.where(edges[:-1] >= t1 - 1e-12, "drain", "steady")),
               "ops_s": cnt / dt, "lat_mean_ms": np.where(cnt > 0, ls / np.maximum(cnt, 1), np.nan)
               * 1e3}
        servers = np.asarray(res.servers, dtype=float)
        ub = np.diff(busy, axis=0) / (servers[None, :] * dt[:, None])
        for cls in model.classes():
            out[f"util_{cls}"] = ub[:, model.station_class == cls].max(axis=1)
    return pd.DataFrame(out).iloc[keep].reset_index(drop=True)
