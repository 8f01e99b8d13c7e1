"""The object-store load from several hosts at once: one `run_load` per Dask worker host
(a running dask.distributed scheduler; e.g. workers in network namespaces, see
clusters.netns), the objects prepared once, the hosts' results merged.

Merged rates and counts (ops/s, MB/s, requests, errors, ...) are the sums of the hosts'
(as fio's "All clients" sums its servers'); merged latencies come from every host's
request records together, never from averaged percentiles.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...errors import CampaignError, LoadError
from .objload import LoadResult, LoadSpec, Target, run_load, summarize

#: Summary keys that add up over hosts (rates over each host's own span, and counts).
ADDITIVE = ("requests", "errors", "unserved", "skipped", "conn_errors", "timeouts",
            "ops_per_s", "mb_per_s", "read_iops", "write_iops", "total_iops",
            "read_bw_bytes", "write_bw_bytes", "total_bw_bytes",
            *(f"{op}_{k}" for op in ("get", "put", "delete")
              for k in ("ops_per_s", "mb_per_s", "errors")))


@dataclass
class HostsResult:
    rows: list[dict[str, Any]]  # one per host: {"host": worker address, **its summary}
    summary: dict[str, float]  # merged: sums of ADDITIVE keys, latencies from all records
    records: pd.DataFrame  # every request, with a `host` column


def _one_host(target: Target, spec: LoadSpec,
              walled: Callable[[Target, LoadSpec], LoadResult] | None = None
              ) -> tuple[str, LoadResult]:
    """Runs on a worker: the load from this host (its address as the scheduler knows it).
    A root worker runs it through `walled` (`objectstore.run_load_walled`, what `storlab
    cluster load` runs: a child in the walls of a campaign's object-store run, TCP to the
    target's ports only, writable only a private directory), unless its host has no
    sandbox (bwrap missing, the kernel refusing namespaces or Landlock) or its
    environment opts out (`STORLAB_UNSANDBOXED=1`); a worker of another account runs it
    in its own process, held by that account's rights."""
    from distributed import get_worker

    return get_worker().address, (walled(target, spec) if walled is not None
                                  and walls_for_load() else run_load(target, spec))


def walls_for_load() -> bool:
    """This process (a Dask worker) should run a load in storlab's walls: it is root and
    the sandbox can be built here."""
    import os

    from ._sandbox import landlock_refused, require_sandbox, unsandboxed

    if os.geteuid() != 0 or unsandboxed():
        return False
    try:
        require_sandbox()
    except CampaignError:  # bwrap missing or refused here
        return False
    return landlock_refused() is None


def pick_workers(info: dict[str, Any], hosts: int) -> list[str]:
    """One worker address per distinct host (IP), the first `hosts` of them in order."""
    by_host: dict[str, str] = {}
    for addr, w in sorted(info.get("workers", {}).items()):
        by_host.setdefault(str(w.get("host", addr)), addr)
    if len(by_host) < hosts:
        raise LoadError(f"--hosts {hosts}: the Dask scheduler has workers on "
                        f"{len(by_host)} host(s) ({', '.join(sorted(by_host)) or 'none'})")
    return [by_host[h] for h in sorted(by_host)[:hosts]]


def merge(per_host: list[tuple[str, LoadResult]], spec: LoadSpec) -> HostsResult:
    """Per-host rows and the merged summary (see the module's doc)."""
    rows = [{"host": h, **r.summary} for h, r in per_host]
    records = pd.concat([r.records.assign(host=h) for h, r in per_host], ignore_index=True)
    # latencies (and errors by kind) from all requests together; then the sums
    summary = summarize(records.drop(columns="host"), spec.warmup, spec.rate)
    for k in ADDITIVE:
        summary[k] = float(sum(r.summary.get(k, 0.0) for _, r in per_host))
    summary["duration_s"] = max((r.summary["duration_s"] for _, r in per_host
                                 if not math.isnan(r.summary["duration_s"])),
                                default=math.nan)
    summary["hosts"] = float(len(per_host))
    return HostsResult(rows, summary, records)


def run_load_on_hosts(address: str, target: Target, spec: LoadSpec, hosts: int,
                      connect_timeout: float = 30, security: Any = None,
                      walled: Callable[[Target, LoadSpec], LoadResult] | None = None
                      ) -> HostsResult:
    """Prepare the objects once (from the first host), then the same load from `hosts`
    worker hosts at once, each with its own seed; merged. `address` is read as
    `clusters.dask_tls.scheduler_address` does (plain TCP refused as root); `security`:
    the client's TLS credentials, else Dask's configuration; `walled`: what a root worker
    runs the load with (`_one_host`)."""
    from distributed import Client

    from ...clusters.dask_tls import client_security, scheduler_address

    if hosts < 1:
        raise LoadError(f"--hosts {hosts} must be at least 1")
    try:
        address = scheduler_address(address)
    except ValueError as exc:
        raise LoadError(str(exc)) from None
    try:
        client = Client(address, timeout=connect_timeout,
                        security=security or client_security())
    except OSError as exc:
        raise LoadError(f"cannot reach the Dask scheduler at {address} ({exc})") from None
    try:
        workers = pick_workers(client.scheduler_info(), hosts)
        if spec.prepare != "never":
            # one GET after the prepare stage: the hosts then start on a full key space
            # instead of all writing the same objects at once
            first = dataclasses.replace(spec, duration=None, requests=1, mix={"get": 1.0},
                                        mode="closed", rate=None, warmup=0.0)
            client.submit(_one_host, target, first, walled, workers=[workers[0]],
                          pure=False, allow_other_workers=False).result()
        main = [dataclasses.replace(spec, seed=spec.seed + i, prepare="never")
                for i in range(hosts)]
        futures = [client.submit(_one_host, target, s, walled, workers=[w], pure=False,
                                 allow_other_workers=False) for s, w in zip(main, workers)]
        per_host = client.gather(futures)
    finally:
        client.close()
    return merge(per_host, spec)
