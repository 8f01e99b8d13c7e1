"""The Swift-like cluster simulator's face: every name callers import from here, re-exported
from the modules that hold them by job (issue 14 split this module):

- `storlab.sim.spec`: the YAML schema, loading, overrides (`ClusterSpec`, `load_raw`, ...);
- `storlab.sim.model`: the built model and the drawn requests (`build_model`, `draw_requests`);
- `storlab.sim.routes`: each request's route through the cluster (`build_routes`);
- `storlab.sim.summary`: the steady-state window, statistics and `SimReport`;
- `storlab.sim.run`: `run_model`, draw + route + simulate + summarise.
"""

from __future__ import annotations

from ..errors import SimError, StorlabError
from ..units import parse_size
from .devices import DeviceModel, DeviceSpec, PRESETS, SMALL_IO, resolve_device
from .engine import FCFS, HOLD, PS, Routes, Stations
from .failures import Failure, add_availability, adjust_routes, apply_failures
from .model import ClusterModel, Requests, build_model, draw_requests
from .ops import DELETE, GET, OPS, PUT
from .ring import Ring, hash_partition
from .ringfile import make_ring, resolve_ring_file
from .routes import ROUTE_CHUNK, build_routes
from .run import run_model
from .spec import (SHORT_KEYS, Calibration, ClusterSpec, CpuCosts, CpuSpec, DiskGroup, Network,
                   NodeGroup, OpCost, RingSpec, SizeDist, SwiftSpec, Workload, apply_overrides,
                   coerce_value, load_cluster, load_raw, parse_cluster, size_sampler)
from .summary import (BATCHES, INTERVALS, POOL_CLASSES, SimReport, flat_metrics, mser,
                      pick_bottleneck, summarise, window_marks)

__all__ = [
    "BATCHES", "Calibration", "ClusterModel", "ClusterSpec", "CpuCosts", "CpuSpec", "DELETE",
    "DeviceModel", "DeviceSpec", "DiskGroup", "FCFS", "Failure", "GET", "HOLD", "INTERVALS",
    "Network", "NodeGroup", "OPS", "OpCost", "POOL_CLASSES", "PRESETS", "PS", "PUT",
    "ROUTE_CHUNK", "Requests", "Ring", "RingSpec", "Routes", "SHORT_KEYS", "SMALL_IO",
    "SimError", "SimReport", "SizeDist", "Stations", "StorlabError", "SwiftSpec", "Workload",
    "add_availability", "adjust_routes", "apply_failures", "apply_overrides", "build_model",
    "build_routes", "coerce_value", "draw_requests", "flat_metrics", "hash_partition", "load_cluster",
    "load_raw", "make_ring", "mser", "parse_cluster", "parse_size", "pick_bottleneck",
    "resolve_device", "resolve_ring_file", "run_model", "size_sampler", "summarise",
    "window_marks",
]
