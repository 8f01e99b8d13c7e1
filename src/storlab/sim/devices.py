"""Device models: how long one I/O of a given size keeps a disk (or one of its channels) busy.

Two families, both reduced to the same two numbers per direction so that the route builder
can vectorise: a fixed per-I/O overhead `a` (seconds) and a per-byte time `1/b`:

* HDD: one actuator, FCFS with one server; overhead = (average seek + half a rotation) times
  `ncq_factor`, transfer at the sustained media rate. An object is one file written or read
  in one go, so it pays one positioning and then streams. A drive with command queueing reorders
  a deep queue and shortens the positioning time; `ncq_factor` < 1 stands for that (the seed
  table's 390 random 4 KiB IOPS for a 7200 rpm drive is only reachable with it).
* SSD / NVMe: `channels` independent servers (FCFS, c servers). The per-channel overhead and
  bandwidth are solved from two published points, random 4 KiB IOPS and sequential 64 KiB
  MB/s, so the model reproduces both exactly and interpolates between them by I/O size.

Presets hold the figures of the Intel Swift simulator seed (SSD S3700, 7200 rpm HDD).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

KIB = 1024
MB = 1_000_000  # disk vendors' MB/s are decimal
SMALL_IO = 4 * KIB
LARGE_IO = 64 * KIB


class DeviceSpec(BaseModel):
    """A disk model as written in the cluster YAML (`kind` picks the family)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["hdd", "ssd", "nvme"]
    # HDD
    seek_ms: float | None = Field(None, gt=0)
    write_seek_ms: float | None = Field(None, gt=0)  # default: seek_ms (write cache shortens it)
    rpm: float | None = Field(None, gt=0)
    ncq_factor: float = Field(1.0, gt=0, le=1.0)
    # HDD and SSD: sustained sequential rates (decimal MB/s)
    read_mb_s: float = Field(..., gt=0)
    write_mb_s: float = Field(..., gt=0)
    # SSD / NVMe
    channels: int | None = Field(None, ge=1)
    read_iops_4k: float | None = Field(None, gt=0)
    write_iops_4k: float | None = Field(None, gt=0)
    capacity_tb: float = Field(1.0, gt=0)

    @model_validator(mode="after")
    def _check_family(self) -> "DeviceSpec":
        need = ("seek_ms", "rpm") if self.kind == "hdd" else (
            "channels", "read_iops_4k", "write_iops_4k")
        missing = [f for f in need if getattr(self, f) is None]
        if missing:
            raise ValueError(f"{self.kind} device needs {', '.join(missing)}")
        return self


#: The seed's "Storage Devices Assumed Performance" table, as device models.
PRESETS: dict[str, DeviceSpec] = {
    # RND 4K R 47,806 / W 59,415 IOPS; SEQ 64K R 492 / W 403 MB/s.
    "ssd_s3700": DeviceSpec(kind="ssd", channels=8, read_iops_4k=47806, write_iops_4k=59415,
                            read_mb_s=492, write_mb_s=403, capacity_tb=1.0),
    # RND 4K R 390 / W 410 IOPS (with command queueing); SEQ 180 MB/s both ways.
    "hdd7200": DeviceSpec(kind="hdd", seek_ms=4.0, write_seek_ms=3.6, rpm=7200, ncq_factor=0.311,
                          read_mb_s=180, write_mb_s=180, capacity_tb=1.0),
    # A datacentre NVMe drive (P4510-class figures): for HDD -> SSD -> NVMe what-ifs.
    "nvme": DeviceSpec(kind="nvme", channels=32, read_iops_4k=636000, write_iops_4k=111000,
                       read_mb_s=3200, write_mb_s=2000, capacity_tb=4.0),
}
PRESETS["ssd"] = PRESETS["ssd_s3700"]
PRESETS["hdd"] = PRESETS["hdd7200"]
#: Reference values the seed published, used by tests and `DeviceModel.table`.
SEED_TABLE = {
    "ssd_s3700": {"read_iops_4k": 47806, "write_iops_4k": 59415,
                  "read_mb_s_64k": 492, "write_mb_s_64k": 403},
    "hdd7200": {"read_iops_4k": 390, "write_iops_4k": 410,
                "read_mb_s_64k": 180, "write_mb_s_64k": 180},
}


@dataclass(frozen=True)
class DeviceModel:
    """Service time of one I/O: overhead + size / per-server bandwidth, on `servers` servers."""

    name: str
    kind: str
    servers: int
    read_overhead: float   # seconds per I/O
    write_overhead: float
    read_bw: float         # bytes/s per server
    write_bw: float

    @classmethod
    def from_spec(cls, name: str, spec: DeviceSpec) -> "DeviceModel":
        if spec.kind == "hdd":
            assert spec.seek_ms is not None and spec.rpm is not None
            half_rot = 30.0 / spec.rpm
            pos_r = (spec.seek_ms * 1e-3 + half_rot) * spec.ncq_factor
            pos_w = ((spec.write_seek_ms or spec.seek_ms) * 1e-3 + half_rot) * spec.ncq_factor
            return cls(name, "hdd", 1, pos_r, pos_w, spec.read_mb_s * MB, spec.write_mb_s * MB)
        c = int(spec.channels or 1)
        a_r, b_r = _solve_channel(c, float(spec.read_iops_4k or 0), spec.read_mb_s * MB)
        a_w, b_w = _solve_channel(c, float(spec.write_iops_4k or 0), spec.write_mb_s * MB)
        return cls(name, spec.kind, c, a_r, a_w, b_r, b_w)

    def service(self, size: np.ndarray | float, write: np.ndarray | bool) -> np.ndarray:
        """Seconds one server spends on I/Os of `size` bytes (vectorised)."""
        size = np.asarray(size, dtype=float)
        write = np.asarray(write, dtype=bool)
        a = np.where(write, self.write_overhead, self.read_overhead)
        b = np.where(write, self.write_bw, self.read_bw)
        return a + size / b

    def iops(self, size: float, write: bool) -> float:
        """Saturated I/O rate with every server busy."""
        return self.servers / float(self.service(size, write))

    def seq_mb_s(self, write: bool) -> float:
        """Sequential 64 KiB MB/s at full queue. An HDD streams without positioning between
        adjacent I/Os; an SSD pays its per-I/O overhead on every channel anyway."""
        if self.kind == "hdd":
            return (self.write_bw if write else self.read_bw) / MB
        return self.iops(LARGE_IO, write) * LARGE_IO / MB

    def table(self) -> dict[str, float]:
        """The four figures of the seed's device table, as this model gives them."""
        return {"read_iops_4k": self.iops(SMALL_IO, False),
                "write_iops_4k": self.iops(SMALL_IO, True),
                "read_mb_s_64k": self.seq_mb_s(False),
                "write_mb_s_64k": self.seq_mb_s(True)}

    def scaled(self, overhead: float = 1.0, bandwidth: float = 1.0) -> "DeviceModel":
        """A copy with overheads and bandwidths multiplied (used by calibration)."""
        return DeviceModel(self.name, self.kind, self.servers, self.read_overhead * overhead,
                           self.write_overhead * overhead, self.read_bw * bandwidth,
                           self.write_bw * bandwidth)


def _solve_channel(channels: int, iops_4k: float, bw_64k: float) -> tuple[float, float]:
    """Per-channel (overhead, bandwidth) that reproduce both the 4 KiB IOPS and 64 KiB MB/s.

    c / (a + 4K/b) = iops and c * 64K / (a + 64K/b) = bw are two linear equations in a, 1/b.
    When the published points are inconsistent with a positive overhead (a tiny 4 KiB cost
    next to a slow 64 KiB rate), fall back to a pure bandwidth model."""
    t_small = channels / iops_4k
    t_large = channels * LARGE_IO / bw_64k
    inv_b = (t_large - t_small) / (LARGE_IO - SMALL_IO)
    if inv_b <= 0:  # 64 KiB faster per I/O than 4 KiB: bandwidth-only fallback
        inv_b = t_large / LARGE_IO
    a = max(t_small - SMALL_IO * inv_b, 0.0)
    return a, 1.0 / inv_b


def resolve_device(name_or_spec: str | DeviceSpec | dict, custom: dict[str, DeviceSpec]
                   ) -> DeviceModel:
    """A DeviceModel from a preset name, a custom name from the YAML, or an inline spec."""
    if isinstance(name_or_spec, DeviceSpec):
        return DeviceModel.from_spec("custom", name_or_spec)
    if isinstance(name_or_spec, dict):
        return DeviceModel.from_spec("custom", DeviceSpec(**name_or_spec))
    key = str(name_or_spec)
    if key in custom:
        return DeviceModel.from_spec(key, custom[key])
    if key in PRESETS:
        return DeviceModel.from_spec(key, PRESETS[key])
    raise KeyError(key)
