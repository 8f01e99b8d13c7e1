"""fio's output read: its JSON document found among the warnings fio writes into it, the
per-job records, and storlab's metrics (and fio's own, under fio's names) aggregated from
them. With several job records (numjobs without group_reporting, or several clients in
client/server mode) percentiles are recomputed from the merged histogram, never averaged.

Parsing is defensive: fio writes warnings into its JSON stream (axboe/fio#731, #1685), so
the document is located by decoding from each line that starts with `{`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .base import find_json

#: Percentiles reported, as (fio key, metric suffix).
PERCENTILES: tuple[tuple[float, str], ...] = (
    (50.0, "p50"), (95.0, "p95"), (99.0, "p99"), (99.9, "p99_9"))
DIRECTIONS = ("read", "write")

METRICS: tuple[str, ...] = (
    "read_iops", "write_iops", "total_iops", "read_bw_bytes", "write_bw_bytes",
    "total_bw_bytes",
    *(f"{d}_clat_{s}_us" for d in DIRECTIONS for s in ("mean", *(p for _, p in PERCENTILES))),
    "usr_cpu", "sys_cpu")


def metric_names() -> set[str]:
    """Every metric a run reports: storlab's (`summarize`) and fio's own names
    (`fio_named`); a tuning objective must be one of them."""
    names = {"total_iops", "total_bw_bytes", "usr_cpu", "sys_cpu"}
    for d in DIRECTIONS:
        names |= {f"{d}_iops", f"{d}_bw_bytes", f"{d}_clat_mean_us"}
        names |= {f"{d}_clat_{suffix}_us" for _, suffix in PERCENTILES}
    return names | set(FIO_NAMED)


def parse_json_output(text: str) -> dict[str, Any]:
    """The fio JSON document in `text`, skipping any warning text before, inside-line or
    after it. Raises ValueError when there is none."""
    try:
        return find_json(text, lambda d: isinstance(d, dict)
                         and ("jobs" in d or "client_stats" in d), objects_only=True)
    except ValueError as exc:
        raise ValueError(str(exc).replace("JSON document", "fio JSON document")) from None


def job_records(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per-job records: `jobs[]` locally, `client_stats[]` in client/server mode without the
    "All clients" aggregate (storlab aggregates itself, from histograms)."""
    if "jobs" in doc:
        return list(doc["jobs"])
    return [r for r in doc.get("client_stats", []) if r.get("jobname") != "All clients"]


def percentile_from_bins(bins: Mapping[str, int] | Mapping[int, int], p: float) -> float:
    """fio's rule: the first histogram bin whose cumulative count reaches p% of the total."""
    items = sorted((int(k), int(v)) for k, v in bins.items())
    total = sum(v for _, v in items)
    if total == 0:
        return float("nan")
    need = p / 100.0 * total
    cum = 0
    for value, count in items:
        cum += count
        if cum >= need:
            return float(value)
    return float(items[-1][0])


def merge_bins(records: Iterable[Mapping[str, Any]], direction: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for r in records:
        for k, v in r[direction]["clat_ns"].get("bins", {}).items():
            out[int(k)] = out.get(int(k), 0) + int(v)
    return out


def summarize(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Aggregate metrics of job records: rates summed, mean latency weighted by I/O count,
    percentiles from one record's own list or from the merged histogram, CPU per host summed
    over its jobs and averaged over hosts."""
    m: dict[str, float] = {}
    for d in DIRECTIONS:
        m[f"{d}_iops"] = float(sum(r[d]["iops"] for r in records))
        m[f"{d}_bw_bytes"] = float(sum(r[d]["bw_bytes"] for r in records))
        n = sum(int(r[d]["clat_ns"].get("N", 0)) for r in records)
        if n == 0:
            for s in ("mean", *(p for _, p in PERCENTILES)):
                m[f"{d}_clat_{s}_us"] = float("nan")
            continue
        mean = sum(r[d]["clat_ns"]["mean"] * r[d]["clat_ns"].get("N", 0) for r in records) / n
        m[f"{d}_clat_mean_us"] = mean / 1000.0
        active = [r for r in records if r[d]["clat_ns"].get("N", 0)]
        bins = merge_bins(active, d)
        for p, suffix in PERCENTILES:
            v = float("nan")
            if len(active) == 1:  # fio's own figure when there is nothing to merge
                v = _fio_percentile(active[0][d]["clat_ns"].get("percentile", {}), p)
            if v != v and bins:  # merged records, or a percentile_list without p
                v = percentile_from_bins(bins, p)
            m[f"{d}_clat_{suffix}_us"] = v / 1000.0
    m["total_iops"] = m["read_iops"] + m["write_iops"]
    m["total_bw_bytes"] = m["read_bw_bytes"] + m["write_bw_bytes"]
    hosts: dict[tuple[str, Any], list[Mapping[str, Any]]] = {}
    for r in records:
        hosts.setdefault(server_key(r), []).append(r)
    for key in ("usr_cpu", "sys_cpu"):
        per_host = [sum(float(r.get(key, 0.0)) for r in rs) for rs in hosts.values()]
        m[key] = sum(per_host) / len(per_host)
    return m


def server_key(record: Mapping[str, Any]) -> tuple[str, Any]:
    """The fio server a client-mode record came from: (hostname, port); fio reports both."""
    return str(record.get("hostname", "")), record.get("port")


#: fio's own names (paths in its JSON output, as fio-plot and jq scripts use them) kept
#: beside storlab's, in fio's units: bw in KiB/s, latencies in ns, runtime in ms.
FIO_NAMED: tuple[str, ...] = (
    *(f"fio.{d}.{k}" for d in DIRECTIONS for k in (
        "iops", "bw", "bw_bytes", "io_bytes", "io_kbytes", "total_ios", "runtime",
        "slat_ns.mean", "clat_ns.mean", "lat_ns.mean",
        *(f"clat_ns.percentile.{p:f}" for p, _ in PERCENTILES))),
    "fio.usr_cpu", "fio.sys_cpu", "fio.ctx", "fio.majf", "fio.minf")


def fio_named(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """fio's own metrics under fio's names (`fio.read.iops`, `fio.read.clat_ns.mean`,
    `fio.read.clat_ns.percentile.99.000000`...). One job record: fio's figures as fio wrote
    them. Several (numjobs without group_reporting, client/server): counts and rates
    summed, means weighted by I/O count, percentiles from the merged histogram, runtime the
    longest, CPU as in `summarize`."""
    out: dict[str, float] = {}
    one = len(records) == 1
    for d in DIRECTIONS:
        rs = [r[d] for r in records]
        for k in ("iops", "bw", "bw_bytes", "io_bytes", "io_kbytes", "total_ios"):
            out[f"fio.{d}.{k}"] = float(sum(float(r.get(k, 0) or 0) for r in rs))
        out[f"fio.{d}.runtime"] = float(max((float(r.get("runtime", 0) or 0) for r in rs),
                                            default=0.0))
        for lat in ("slat_ns", "clat_ns", "lat_ns"):
            n = sum(int(r.get(lat, {}).get("N", 0)) for r in rs)
            out[f"fio.{d}.{lat}.mean"] = (
                sum(float(r[lat]["mean"]) * int(r[lat].get("N", 0)) for r in rs
                    if int(r.get(lat, {}).get("N", 0))) / n if n else float("nan"))
        active = [r for r in records if int(r[d]["clat_ns"].get("N", 0))]
        bins = merge_bins(active, d) if not one else {}
        for p, _ in PERCENTILES:
            v = float("nan")
            if one and active:
                v = _fio_percentile(active[0][d]["clat_ns"].get("percentile", {}), p)
                if v != v:
                    bins = bins or merge_bins(active, d)
            if v != v and bins:
                v = percentile_from_bins(bins, p)
            out[f"fio.{d}.clat_ns.percentile.{p:f}"] = v
    hosts: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        hosts.setdefault(str(r.get("hostname", "")), []).append(r)
    for key in ("usr_cpu", "sys_cpu", "ctx", "majf", "minf"):
        per_host = [sum(float(r.get(key, 0.0) or 0) for r in rs) for rs in hosts.values()]
        out[f"fio.{key}"] = sum(per_host) / len(per_host) if per_host else float("nan")
    return out


def _fio_percentile(table: Mapping[str, Any], p: float) -> float:
    for k, v in table.items():
        if abs(float(k) - p) < 1e-6:
            return float(v)
    return float("nan")
