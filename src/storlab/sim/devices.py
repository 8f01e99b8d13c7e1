"""Device models: how long one I/O of a given size keeps a disk busy.

* HDD: one actuator, one FCFS station; an I/O takes (average seek + half a rotation) x
  `ncq_factor` + size / media rate. An object is one file written or read in one go, so it
  pays one positioning and then streams. A drive with command queueing reorders a deep queue
  and shortens positioning; `ncq_factor` < 1 stands for that (the seed table's 390 random
  4 KiB IOPS for a 7200 rpm drive is only reachable with it).
* SSD / NVMe: an IOPS limit and a bandwidth limit in series, the classic two-limit model
  that reproduces both published points exactly: an FCFS station with `channels` servers
  holding each I/O for `channels / IOPS_4k` (the per-command cost, overlapped across
  channels), then a processor-sharing "transfer" station at the sequential bandwidth, so one
  large I/O streams at full device speed while concurrent ones share it.

Presets hold the figures of the Intel Swift simulator seed (SSD S3700, 7200 rpm HDD).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
    """Per-I/O overhead on `servers` FCFS servers plus a transfer time. `split`: the transfer
    runs on a separate shared-bandwidth station (SSD/NVMe); otherwise it is part of the
    FCFS service (HDD: the actuator is held while streaming)."""

    name: str
    kind: str
    servers: int
    read_overhead: float   # seconds per I/O on one server
    write_overhead: float
    read_bw: float         # bytes/s (HDD: media rate; SSD: whole device)
    write_bw: float
    split: bool = False

    @classmethod
    def from_spec(cls, name: str, spec: DeviceSpec) -> "DeviceModel":
        if spec.kind == "hdd":
            assert spec.seek_ms is not None and spec.rpm is not None
            half_rot = 30.0 / spec.rpm
            pos_r = (spec.seek_ms * 1e-3 + half_rot) * spec.ncq_factor
            pos_w = ((spec.write_seek_ms or spec.seek_ms) * 1e-3 + half_rot) * spec.ncq_factor
            return cls(name, "hdd", 1, pos_r, pos_w, spec.read_mb_s * MB, spec.write_mb_s * MB)
        c = int(spec.channels or 1)
        return cls(name, spec.kind, c, c / float(spec.read_iops_4k or 1),
                   c / float(spec.write_iops_4k or 1), spec.read_mb_s * MB,
                   spec.write_mb_s * MB, split=True)

    def overhead(self, write: np.ndarray | bool) -> np.ndarray:
        return np.where(write, self.write_overhead, self.read_overhead)

    def transfer(self, size: np.ndarray | float, write: np.ndarray | bool) -> np.ndarray:
        return np.asarray(size, dtype=float) / np.where(write, self.write_bw, self.read_bw)

    def service(self, size: np.ndarray | float, write: np.ndarray | bool) -> np.ndarray:
        """Unloaded time of one I/O (overhead + transfer)."""
        return self.overhead(write) + self.transfer(size, write)

    def iops(self, size: float, write: bool) -> float:
        """Saturated I/O rate at a deep queue."""
        if self.split:
            return float(min(self.servers / self.overhead(write), 1.0 / self.transfer(size, write)))
        return self.servers / float(self.service(size, write))

    def seq_mb_s(self, write: bool) -> float:
        """Sequential 64 KiB MB/s at a deep queue. An HDD streams without positioning
        between adjacent I/Os."""
        if not self.split:
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
        return replace(self, read_overhead=self.read_overhead * overhead,
                       write_overhead=self.write_overhead * overhead,
                       read_bw=self.read_bw * bandwidth, write_bw=self.write_bw * bandwidth)


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
