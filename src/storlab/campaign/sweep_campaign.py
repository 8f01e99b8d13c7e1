"""Simulator what-if sweeps as campaigns: `storlab simulate CLUSTER --sweep nodes=4,8 ...`.

A sweep is the full factorial of its axes (the design package's), run by the simulator
runner through the campaign loop, its executors and its SQLite store: every finished point
is committed at once, and the same command resumes a killed sweep without redoing the
points it finished. The campaign directory holds `cluster.yaml` (the cluster with --set
applied), `campaign.yaml` and the store, so `storlab results/status/report` read it too.

An axis with one value is not a factor (a factor needs two values): it is applied to the
cluster file and shown as a constant column. The table comes back in the sweep's order
(first axis varying slowest), whatever order the executor finished the points in.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from ..errors import SimError
from ..errors import StorlabError
from ..fileio import check_trusted_dir, open_dir_beneath, temporary_directory, write_in_dir
from ..sim.spec import SHORT_KEYS, apply_overrides, coerce_value, parse_cluster
from ..sim.sweep import SweepResult
from ..units import parse_size

Event = Callable[[str, dict[str, Any]], None]
#: The sweep's own executor names (kept from before it was a campaign) besides the
#: campaign's (sequential, parallel[:N], dask://host:port).
EXECUTORS = "local, serial, sequential, parallel[:N], dask or dask://host:port"


def sweep_digest(raw: Mapping[str, Any], sweeps: Mapping[str, Sequence[Any]],
                 analytic: bool, backend: str) -> str:
    """A short name for everything a sweep's results depend on (the default directory)."""
    text = json.dumps({"cluster": raw, "sweeps": {k: list(v) for k, v in sweeps.items()},
                       "analytic": analytic, "backend": backend}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def default_directory(raw: Mapping[str, Any], sweeps: Mapping[str, Sequence[Any]],
                      analytic: bool, backend: str, source: str) -> Path:
    """`simulate-sweep/<cluster>-<digest>`: the same command finds its campaign again, and
    another sweep gets its own."""
    stem = Path(source).stem or "cluster"
    return Path("simulate-sweep") / f"{stem}-{sweep_digest(raw, sweeps, analytic, backend)}"


def write_sweep_campaign(raw: Mapping[str, Any], sweeps: Mapping[str, Sequence[Any]],
                         directory: Path, *, analytic: bool = False, backend: str = "rust",
                         source: str = "cluster") -> Path:
    """Write cluster.yaml and campaign.yaml for the sweep into `directory`; the campaign
    file's path. A directory holding another sweep is refused (one line)."""
    if not sweeps:
        raise SimError(f"{source}: empty sweep")
    axes: dict[str, list[Any]] = {}
    for name, values in sweeps.items():
        vals = list(values)
        if not vals:
            raise SimError(f"--sweep {name}: no values")
        dup = sorted({str(v) for v in vals if vals.count(v) > 1})
        if dup:
            raise SimError(f"--sweep {name}: value {dup[0]!r} is given twice")
        axes[str(name)] = vals
    factors = {k: v for k, v in axes.items() if len(v) > 1}
    fixed = {k: v[0] for k, v in axes.items() if len(v) == 1}
    if not factors:
        raise SimError("--sweep: every axis has one value, so there is nothing to sweep; use "
                       "--set NAME=VALUE for a single run")
    cluster = apply_overrides(raw, fixed, source) if fixed else dict(raw)
    # A typo fails here with one line, before any run (a bad value elsewhere in the grid
    # is a failed point with its reason; the sweep goes on).
    parse_cluster(apply_overrides(cluster, {k: v[0] for k, v in factors.items()}, source),
                  source)
    spec = {"name": "simulate-sweep",
            "space": {"name": "simulate-sweep",
                      "factors": [{"name": k, "kind": "categorical", "values": v}
                                  for k, v in factors.items()]},
            "design": {"kind": "full"},
            "runner": {"type": "simulator",
                       "options": {"cluster": "cluster.yaml", "analytic": bool(analytic),
                                   "backend": backend}},
            "repetitions": 1, "randomize": False, "seed": 0,
            "store": "campaign.db", "workdir": "scratch"}
    texts = {"cluster.yaml": yaml.safe_dump(cluster, sort_keys=False),
             # (no file name here: the same cluster given by another path is the same sweep)
             "campaign.yaml": ("# storlab simulate CLUSTER --sweep: the full factorial of "
                               "the axes below, one simulated run each\n"
                               + (f"# constant axes (in cluster.yaml): {json.dumps(fixed)}\n"
                                  if fixed else "")
                               + "# axes: " + json.dumps(axes, default=str) + "\n"
                               + yaml.safe_dump(spec, sort_keys=False))}
    if directory.exists() and not directory.is_dir():
        raise SimError(f"--campaign {directory}: not a directory")
    if os.geteuid() == 0:  # as root: a directory no other user can swap (as `run` asks)
        try:
            check_trusted_dir(directory, "--campaign")
        except StorlabError as exc:
            raise SimError(f"{exc}; as root, give a --campaign directory only root can "
                           "change, or run storlab as that user") from None
    # Made and opened one component at a time without following a link (storlab often
    # runs as root: a `simulate-sweep` link planted in the working directory must not
    # make root write the campaign, its store and scratch where it leads), and its files
    # read and written through the held descriptor.
    dfd = open_dir_beneath(_sweep_home(directory), directory, what="--campaign")
    try:
        for name, text in texts.items():
            if _read_beneath(dfd, name, directory) not in (None, text):
                raise SimError(f"--campaign {directory}: holds another sweep ({name} "
                               "differs from this command's); give another --campaign or "
                               "remove it")
        for name, text in texts.items():  # temp + rename, in the held directory
            write_in_dir(directory, name, text, home=directory, home_fd=dfd)
    finally:
        os.close(dfd)
    return directory / "campaign.yaml"


def _sweep_home(directory: Path) -> Path:
    """Where the walk to a sweep's directory starts, opened as named: the working directory
    when the sweep lies in it (the default `simulate-sweep/...`), else the nearest existing
    directory above it (the user's own path)."""
    cwd = Path.cwd()
    if directory == cwd or cwd in directory.parents:
        return cwd
    return next((p for p in directory.parents if p.is_dir()), Path("/"))


def _read_beneath(dfd: int, name: str, directory: Path) -> str | None:
    """The text of `name` in the held directory `dfd` (never through a link), or None."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SimError(f"--campaign {directory}/{name}: cannot read "
                       f"({exc.strerror or exc}); remove it") from None
    with os.fdopen(fd, "rb") as fh:
        return fh.read().decode(errors="replace")


def check_executor(executor: str) -> None:
    """Refuse an unknown `--executor` before anything is written."""
    from .executors import DASK_PREFIXES

    e = (executor or "local").strip()
    if e not in ("local", "serial", "sequential", "parallel", "dask") and \
            not e.startswith(("parallel:", *DASK_PREFIXES)):
        raise SimError(f"--executor {executor!r}: use {EXECUTORS}")
    n = e.partition(":")[2] if e.startswith("parallel:") else "1"
    if not (n.isascii() and n.isdigit() and int(n) > 0):
        raise SimError(f"--executor {executor!r}: parallel:N needs a positive N")


@contextlib.contextmanager
def campaign_executor(executor: str, workers: int | None, points: int) -> Iterator[str]:
    """The campaign executor for a sweep's `--executor`: `local` (the default) is local
    processes, `serial` one point after the other, `dask` a Dask cluster started here for
    the sweep; the campaign's own names pass through."""
    from .executors import DASK_PREFIXES

    e = (executor or "local").strip()
    if workers is not None and workers < 1:
        raise SimError(f"--workers {workers}: must be at least 1")
    if e in ("serial", "sequential") or (e == "local" and points == 1):
        yield "sequential"
    elif e in ("local", "parallel"):
        n = workers or min(points, os.cpu_count() or 1)
        yield "sequential" if n == 1 else f"parallel:{n}"
    elif e.startswith(("parallel:", *DASK_PREFIXES)):
        yield e
    elif e == "dask":
        from .executors import local_dask_cluster

        stack = contextlib.ExitStack()
        try:
            where = stack.enter_context(local_dask_cluster(workers))
        except OSError as exc:
            raise SimError(f"--executor dask: cannot start a local Dask cluster ({exc})"
                           ) from None
        with stack:
            yield "dask://" + where
    else:
        check_executor(e)
        raise SimError(f"--executor {executor!r}: use {EXECUTORS}")


def run_sweep(raw: Mapping[str, Any], sweeps: Mapping[str, Sequence[Any]], *,
              analytic: bool = False, executor: str = "local", workers: int | None = None,
              source: str = "cluster", backend: str = "rust",
              campaign: str | Path | None = None, on_event: Event | None = None,
              wait: bool = False) -> SweepResult:
    """Run every point of the sweep as a campaign in `campaign` (a directory; resumed when
    it holds this sweep already; None: a temporary one, nothing kept). `executor`: 'local'
    (processes), 'serial', 'dask' (a local Dask cluster), 'dask://host:port', or a
    campaign executor. `on_event` receives the campaign's progress events; `wait`: wait for
    another storlab running the same sweep directory instead of refusing."""
    from .campaign import Campaign
    from .spec import CampaignError

    check_executor(executor)
    with contextlib.ExitStack() as stack:
        if campaign is None:
            directory = Path(stack.enter_context(temporary_directory("storlab-sweep-")))
        else:
            directory = Path(campaign).absolute()
        path = write_sweep_campaign(raw, sweeps, directory, analytic=analytic,
                                    backend=backend, source=source)
        try:
            camp = Campaign.load(path)
            ex = stack.enter_context(campaign_executor(executor, workers, len(camp.configs)))
            summary = camp.run(executor=ex, retry_failed=True, on_event=on_event, wait=wait)
        except CampaignError as exc:
            raise SimError(str(exc)) from None
        if summary.interrupted:
            raise SimError(f"interrupted; {directory} keeps the finished points: the same "
                           "command resumes")
        rows = sweep_rows(camp, sweeps)
    return SweepResult(list(sweeps), rows, analytic,
                       campaign=None if campaign is None else directory)


def _num(v: Any) -> float:
    """A number from a run's JSON (None, missing or text: NaN)."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def sweep_rows(camp: Any, sweeps: Mapping[str, Sequence[Any]]) -> pd.DataFrame:
    """One row per point from the campaign's store, in the sweep's order: the axes, then
    the COLUMNS, the utilisation of each resource, and `error` for points that failed."""
    from .store import Store

    with Store(camp.store_path, readonly=True) as store:
        configs = store.configs()
        runs = {r["config_id"]: r for r in store.runs(with_raw=True) if not r["warmup"]}
    axes = {str(k): list(v) for k, v in sweeps.items()}
    rows = []
    for cid, cfg, _ in configs:
        r = runs.get(cid)
        # each axis value as the simulator read it: 14 a number, 64KiB a size string
        row: dict[str, Any] = {k: coerce_value(cfg[k] if k in cfg else v[0])
                               for k, v in axes.items()}
        if r is None or r["status"] != "ok":
            err = ((r or {}).get("stderr_tail") or "").strip().splitlines()
            row["error"] = err[-1] if err else f"run {(r or {}).get('status', 'missing')}"
        else:
            m = r["metrics"]
            try:  # the whole report (SimReport.to_dict) is the run's raw output
                doc = json.loads(r.get("raw") or "{}")
                bottleneck = doc["bottleneck"]["resource"]
                total = next((o for o in doc.get("ops") or [] if o.get("op") == "ALL"), {})
            except (ValueError, KeyError, TypeError, AttributeError):
                bottleneck, total = "", {}
            # The 95 % batch-means half-widths of the run (a simulated point; the
            # analytic model has none).
            row.update({"ops_s": m.get("ops_s", np.nan),
                        "ops_s_ci95": _num(total.get("ops_s_ci95")),
                        "mb_s": m.get("mb_s", np.nan),
                        "lat_mean_ms": m.get("lat_mean_ms", np.nan),
                        "lat_mean_ci95_ms": _num(total.get("lat_mean_ci95_ms")),
                        "lat_p99_ms": m.get("lat_p99_ms", np.nan), "bottleneck": bottleneck,
                        "bottleneck_util": m.get("bottleneck_util", np.nan)})
            if total.get("availability") is not None:  # failures were simulated
                row["availability"] = float(total["availability"])
                # the share of the measured window with something down (the report's)
                row["down_share"] = _num((doc.get("window") or {}).get("down_share"))
            row.update({k: v for k, v in m.items() if k.startswith("util_")})
        rows.append(row)
    # The sweep's order: first axis slowest (the design lists the factorial first-fastest).
    rank = {k: {json.dumps(coerce_value(x), default=str): i for i, x in enumerate(v)}
            for k, v in axes.items()}
    rows.sort(key=lambda row: tuple(rank[k].get(json.dumps(row[k], default=str), 0)
                                    for k in axes))
    df = pd.DataFrame(rows)
    for k in axes:  # object sizes as written ("64KiB") and, beside them, in bytes
        if SHORT_KEYS.get(k, k) == "workload.object_size":
            try:
                nbytes = [parse_size(v) for v in df[k]]
            except (ValueError, TypeError):  # a size distribution, not one size
                continue
            df.insert(df.columns.get_loc(k) + 1, f"{k}_bytes", nbytes)
    for ci in ("ops_s_ci95", "lat_mean_ci95_ms"):  # analytic sweeps: no interval at all
        if ci in df and df[ci].isna().all():
            df = df.drop(columns=ci)
    if "error" in df:  # failed points keep their row; the reason goes last
        df = df[[c for c in df.columns if c != "error"] + ["error"]]
    return df


__all__ = ["EXECUTORS", "campaign_executor", "check_executor", "default_directory", "run_sweep",
           "sweep_digest", "sweep_rows", "write_sweep_campaign"]
