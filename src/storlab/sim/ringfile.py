"""Read a ring file written by Swift's `swift-ring-builder` (or `RingData.save`), without Swift.

Format v1 (swift/common/ring/ring.py, `RingData.serialize_v1`): a gzip stream holding the
magic b"R1NG", a big-endian uint16 version (1), a big-endian uint32 length, that many bytes
of JSON (`devs`, `part_shift`, `replica_count`, `byteorder`, ...), then one array of
unsigned 16-bit device ids per replica, each 2**part_power long (a fractional last replica
is shorter), in the writer's `byteorder`.
"""

from __future__ import annotations

import gzip
import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import RingFileError, SimError  # RingFileError: also here for old imports

if TYPE_CHECKING:
    from .ring import Ring


@dataclass
class RingFile:
    """What a ring file holds: devices (Swift's dicts; None for removed ids), the part power
    and `r2p2d[replica, part]` of Swift device ids."""

    path: Path
    part_power: int
    r2p2d: np.ndarray          # int32 [replicas, partitions]
    devs: list[dict[str, Any] | None]

    @property
    def replicas(self) -> int:
        return int(self.r2p2d.shape[0])

    def used_devices(self) -> list[dict[str, Any]]:
        """Devices that exist (weight zero included), in id order."""
        return [d for d in self.devs if d is not None]


def read_ring_file(path: str | Path) -> RingFile:
    p = Path(path)
    try:
        with gzip.open(p, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise RingFileError(f"{p}: ring file not found") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise RingFileError(f"{p}: not a gzipped Swift ring file ({exc})") from None
    if data[:4] != b"R1NG":
        raise RingFileError(f"{p}: not a Swift ring file (no R1NG magic; pickled rings from "
                            "Swift before 1.7 are not read)")
    try:
        version, json_len = struct.unpack_from("!HI", data, 4)
    except struct.error:
        raise RingFileError(f"{p}: truncated ring header") from None
    if version != 1:
        raise RingFileError(f"{p}: ring format version {version} (only 1 is known)")
    off = 10
    try:
        meta = json.loads(data[off:off + json_len])
        part_shift = int(meta["part_shift"])
        replica_count = int(meta["replica_count"])
        devs = meta["devs"]
    except (ValueError, KeyError, TypeError):
        raise RingFileError(f"{p}: ring metadata is not the JSON Swift writes") from None
    off += json_len
    part_power = 32 - part_shift
    parts = 1 << part_power
    dtype = np.dtype(">u2" if meta.get("byteorder", "little") == "big" else "<u2")
    rows = []
    for r in range(replica_count):
        chunk = data[off:off + 2 * parts]
        off += len(chunk)
        if len(chunk) < 2 * parts:
            raise RingFileError(f"{p}: replica {r} holds {len(chunk) // 2} of {parts} "
                                "partitions (fractional replica counts are not simulated)")
        rows.append(np.frombuffer(chunk, dtype=dtype).astype(np.int32))
    r2p2d = np.stack(rows) if rows else np.zeros((0, parts), dtype=np.int32)
    bad = [int(d) for d in np.unique(r2p2d) if d >= len(devs) or devs[d] is None]
    if bad:
        raise RingFileError(f"{p}: partitions assigned to device ids without a device: {bad[:5]}")
    return RingFile(p, part_power, r2p2d, devs)


_CACHE: dict[tuple, RingFile] = {}


def read_ring_file_cached(path: str | Path) -> RingFile:
    """`read_ring_file`, remembered per path and modification time (sweeps reuse it)."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return read_ring_file(p)
    key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _CACHE:
        if len(_CACHE) > 8:
            _CACHE.clear()
        _CACHE[key] = read_ring_file(p)
    return _CACHE[key]


def ring_from_file(path: str | Path, dev_node: np.ndarray) -> Ring:
    """A `Ring` over the cluster's devices from a Swift ring file.

    The ring's servers (distinct ip:port, in device-id order) are matched to the cluster's
    storage nodes in file order, and each server's devices (by id) to that node's disks, so
    the ring file and the cluster file must describe the same layout. Zones, regions and
    Swift's server tier (the IP, for handoffs) come from the ring file."""
    from .ring import Ring

    rf = read_ring_file_cached(path)
    devs = rf.used_devices()
    servers: dict[tuple, list[dict[str, Any]]] = {}
    for d in devs:
        servers.setdefault((d.get("ip"), d.get("port")), []).append(d)
    nodes = list(dict.fromkeys(np.asarray(dev_node).tolist()))
    ours = [np.flatnonzero(np.asarray(dev_node) == n) for n in nodes]
    theirs = [len(v) for v in servers.values()]
    if theirs != [len(o) for o in ours]:
        raise RingFileError(
            f"{rf.path}: ring has {len(theirs)} servers with {_counts(theirs)} devices; the "
            f"cluster has {len(ours)} storage nodes with {_counts([len(o) for o in ours])} "
            "disks (nodes match servers in order, disks match devices by id)")
    index = np.full(len(rf.devs), -1, dtype=np.int32)
    n_dev = int(np.asarray(dev_node).size)
    zone = np.zeros(n_dev, dtype=np.int32)
    region = np.zeros(n_dev, dtype=np.int32)
    weight = np.zeros(n_dev, dtype=float)
    ip_ids: dict[Any, int] = {}
    server = np.zeros(n_dev, dtype=np.int32)
    for sdevs, our in zip(servers.values(), ours):
        for d, k in zip(sdevs, our):
            index[int(d["id"])] = k
            zone[k] = int(d.get("zone", 0))
            region[k] = int(d.get("region", 1))
            weight[k] = float(d.get("weight", 0.0))
            server[k] = ip_ids.setdefault(d.get("ip"), len(ip_ids))
    r2p2d = index[rf.r2p2d]
    ring = Ring(rf.part_power, np.ascontiguousarray(r2p2d), np.asarray(dev_node, dtype=np.int32),
                zone, weight, dev_region=region, placement=f"file:{rf.path.name}",
                dev_server=server)
    return ring


def _counts(xs: list[int]) -> str:
    vals = sorted(set(xs))
    return ",".join(map(str, vals)) if len(vals) <= 4 else f"{vals[0]}-{vals[-1]}"


def resolve_ring_file(raw: dict[str, Any], base: Path) -> None:
    """Make a cluster file's relative `ring.file` relative to the cluster file's folder."""
    ring = raw.get("ring")
    if isinstance(ring, dict) and isinstance(ring.get("file"), str):
        f = Path(ring["file"]).expanduser()
        if not f.is_absolute():
            ring["file"] = str(base / f)


def make_ring(spec: Any, dev_node: list[int], dev_zone: list[int], dev_weight: list[float],
              part_power: int, dev_region: list[int] | None = None) -> Ring:
    """The cluster's ring: read from `ring.file`, else built as Swift's builder would; hashed
    with the cluster's prefix and suffix."""
    from .ring import Ring

    rs = spec.ring
    sw = spec.swift
    if rs.file:
        ring = ring_from_file(rs.file, np.asarray(dev_node, dtype=np.int32))
        if ring.replicas != sw.replicas:
            raise SimError(f"{rs.file}: ring has {ring.replicas} replicas, swift.replicas is "
                           f"{sw.replicas}: set replicas: {ring.replicas}")
        if sw.part_power is not None and sw.part_power != ring.part_power:
            raise SimError(f"{rs.file}: ring has part_power {ring.part_power}, "
                           f"swift.part_power is {sw.part_power}")
    else:
        try:
            ring = Ring.build(dev_node, dev_zone, dev_weight, part_power, sw.replicas,
                              sw.ring_seed, placement=rs.placement, overload=rs.overload,
                              dev_region=dev_region)
        except ValueError as exc:
            raise SimError(f"ring: {exc}") from None
    ring.prefix = rs.hash_path_prefix.encode()
    ring.suffix = rs.hash_path_suffix.encode()
    return ring
