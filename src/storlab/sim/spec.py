"""The cluster YAML's schema (pydantic, with the object-size samplers it validates), loading
it, and command-line overrides."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import SimError, StorlabError
from ..units import parse_size
from .devices import DeviceSpec, PRESETS
from .failures import Failure
from .ringfile import resolve_ring_file


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
    #: Swift's region and zone of the group's nodes: one number for all, or one per node
    #: (the ring disperses replicas over regions first, then zones, servers, disks)
    region: Annotated[int, Field(ge=0)] | list[Annotated[int, Field(ge=0)]] | None = None
    zone: Annotated[int, Field(ge=0)] | list[Annotated[int, Field(ge=0)]] | None = None

    @field_validator("disks", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, Mapping) else v

    @field_validator("region", "zone", mode="before")
    @classmethod
    def _whole_numbers(cls, v: Any) -> Any:
        # pydantic would take "2" or 2.0 for 2; a zone written as a string or a float is
        # more likely a mistake (a name, a rack number with a typo) than a number
        for x in v if isinstance(v, list) else [v]:
            if x is not None and (isinstance(x, bool) or not isinstance(x, int)):
                raise ValueError(f"must be a whole number >= 0 or a list of them, one per node "
                                 f"(got {x!r})")
        return v

    @model_validator(mode="after")
    def _one_per_node(self) -> "NodeGroup":
        for field in ("region", "zone"):
            v = getattr(self, field)
            if isinstance(v, list) and len(v) != self.count:
                raise ValueError(f"{field}: {len(v)} values for {self.count} nodes (give one "
                                 f"number for the whole group, or one per node)")
        return self

    def placed_at(self, field: str, k: int) -> int | None:
        """The region or zone (`field`) of the group's k-th node, None when not given."""
        v = getattr(self, field)
        return v[k] if isinstance(v, list) else v


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
    post_quorum_wait: bool = Field(
        True, description="the proxy answers a PUT/DELETE once every live replica has (Swift's "
        "proxy waits post_quorum_timeout, 0.5 s, past the quorum for the rest; measured on a "
        "real Swift), not at the quorum (false)")
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
            # Swift's replication policy: half the replicas rounded up (2 of 3, 1 of 2, 2 of
            # 4), not a strict majority.
            self.write_quorum = (self.replicas + 1) // 2
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
        size_sampler(self.object_size)  # validate now, not mid-run
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
        self._check_placement()
        return self

    def _check_placement(self) -> None:
        """Regions and zones are given for every storage group or for none (a default next
        to a given number would collide with it silently); proxies hold no devices."""
        storage = [i for i, g in enumerate(self.nodes) if g.role in ("storage", "both")]
        for field in ("region", "zone"):
            for i, g in enumerate(self.nodes):
                if g.role == "proxy" and getattr(g, field) is not None:
                    raise ValueError(f"nodes.{i}.{field}: a proxy group holds no devices, "
                                     f"so no ring {field}")
            given = [i for i in storage if getattr(self.nodes[i], field) is not None]
            if given and len(given) < len(storage):
                missing = next(i for i in storage if i not in given)
                raise ValueError(f"nodes.{missing}.{field}: missing while nodes.{given[0]} "
                                 f"gives one; give every storage group its {field}")
        if self.swift.zones is not None and any(self.nodes[i].zone is not None for i in storage):
            raise ValueError("swift.zones: set while node groups give their zones; drop one")


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
    "post_quorum_wait": "swift.post_quorum_wait",
    "clients": "workload.clients", "rate": "workload.rate", "object_size": "workload.object_size",
    "requests": "workload.requests", "duration": "workload.duration",
    "think_ms": "workload.think_ms", "mix": "workload.mix", "seed": "workload.seed",
    "objects": "workload.objects", "topology": "network.topology",
    "oversubscription": "network.oversubscription",
}
_ROLE_SELECT = {"proxy": ("proxy",), "storage": ("storage", "both"), "both": ("both",),
                "*": ("proxy", "storage", "both")}


def coerce_value(value: Any) -> Any:
    """Strings from the command line become numbers when they look like numbers (and
    "null"/"none" None): the value an override or a sweep axis sets."""
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
        value = coerce_value(value)
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
def size_sampler(spec: Any):
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
