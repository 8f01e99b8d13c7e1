"""fio runner: one configuration -> one fio job -> parsed metrics.

Every fio option may be fixed in the constructor or supplied by the configuration (the
configuration wins). fio runs with `--output-format=json+` so that the latency histograms
come back: with several job records (numjobs without group_reporting, or several clients in
client/server mode) percentiles are recomputed from the merged histogram, never averaged.

Parsing is defensive: fio writes warnings into its JSON stream (axboe/fio#731, #1685), so
the document is located by decoding from each line that starts with `{`.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..spec import CampaignError
from ._proc import render_value, run_program, tail
from .base import RunResult

#: Percentiles reported, as (fio key, metric suffix).
PERCENTILES: tuple[tuple[float, str], ...] = (
    (50.0, "p50"), (95.0, "p95"), (99.0, "p99"), (99.9, "p99_9"))
DIRECTIONS = ("read", "write")
#: Engines whose target is not a local file (no default scratch directory for them).
REMOTE_ENGINES = {"rbd", "rados", "http", "net", "netsplice", "nfs", "libcufile", "nbd"}
#: Constructor keywords that configure the runner rather than fio.
RUNNER_KEYS = ("fio", "clients", "allow_destructive", "job_name", "extra_args")

METRICS: tuple[str, ...] = (
    "read_iops", "write_iops", "total_iops", "read_bw_bytes", "write_bw_bytes",
    "total_bw_bytes",
    *(f"{d}_clat_{s}_us" for d in DIRECTIONS for s in ("mean", *(p for _, p in PERCENTILES))),
    "usr_cpu", "sys_cpu")


class FioRunner:
    """Runs fio with fixed options plus the configuration's options.

    `clients`: fio servers (`host` or `host,port`) for client/server mode: one run drives
    them all and the metrics are their aggregate; `RunResult.rows` keeps one row per host.
    `allow_destructive`: permit a block device as `filename` (fio would overwrite it).
    """

    name = "fio"

    def __init__(self, fio: str = "fio", clients: Sequence[str] | None = None,
                 allow_destructive: bool = False, job_name: str = "storlab",
                 extra_args: Sequence[str] = (), **options: Any) -> None:
        self.fio = fio
        self.clients = [str(c) for c in (clients or [])]
        self.allow_destructive = bool(allow_destructive)
        self.job_name = job_name
        self.extra_args = [str(a) for a in extra_args]
        self.options = dict(options)

    # ------------------------------------------------------------------ job
    def job_options(self, config: Mapping[str, Any], workdir: Path) -> dict[str, str]:
        """The fio options of one run: fixed, then the configuration's, then defaults."""
        opts = {k: render_value(v) for k, v in self.options.items() if v is not None}
        opts.update({k: render_value(v) for k, v in config.items() if v is not None})
        engine = opts.get("ioengine", "")
        if not {"filename", "directory", "filename_format"} & opts.keys() \
                and engine not in REMOTE_ENGINES:
            opts["directory"] = str(workdir)  # the run's own scratch directory
        opts.setdefault("group_reporting", "1")
        return opts

    def check_target(self, config: Mapping[str, Any], base: Path | None = None) -> None:
        """Refuse a block device target unless `allow_destructive` (raised before fio runs).

        With `base` (the campaign's directory), an existing file outside it is refused too:
        fio would write into somebody's data.
        """
        if self.allow_destructive:
            return
        opts = {**self.options, **config}
        for dev in _block_devices(opts):
            raise CampaignError(f"fio target {dev} is a block device: fio would overwrite it; "
                                "set allow_destructive: true in the runner options to allow it")
        if base is None:
            return
        root = Path(base).resolve()
        for p in _targets(opts):
            path = Path(p) if Path(p).is_absolute() else root / p
            if path.is_file() and not path.resolve().is_relative_to(root):
                raise CampaignError(f"fio target {p} is an existing file outside the campaign "
                                    "directory: fio may overwrite it; set allow_destructive: "
                                    "true in the runner options to allow it")

    def argv(self, opts: Mapping[str, str], jobfile: Path | None = None) -> list[str]:
        """fio's command line: options as `--key=value` argv elements (no shell), or a
        job file for client/server mode (fio sends job files to its servers)."""
        base = [self.fio, "--output-format=json+", *self.extra_args]
        if jobfile is not None:
            out = list(base)
            for c in self.clients:
                out += [f"--client={c}", str(jobfile)]
            return out
        return [*base, f"--name={self.job_name}", *(f"--{k}={v}" for k, v in opts.items())]

    def write_jobfile(self, opts: Mapping[str, str], path: Path) -> Path:
        lines = [f"[{self.job_name}]"]
        for k, v in opts.items():
            if "\n" in v or "\n" in k:
                raise CampaignError(f"fio option {k!r} has a newline in its value")
            lines.append(f"{k}={v}")
        path.write_text("\n".join(lines) + "\n")
        return path

    # ------------------------------------------------------------------ run
    def run(self, config: Mapping[str, Any], workdir: Path, timeout: float | None = None
            ) -> RunResult:
        """Run fio once for `config` in `workdir` and parse what it printed."""
        self.check_target(config)
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        opts = self.job_options(config, workdir)
        jobfile = self.write_jobfile(opts, workdir / "job.fio") if self.clients else None
        proc = run_program(self.argv(opts, jobfile), cwd=workdir, timeout=timeout)
        res = RunResult("failed", raw=proc.stdout, stderr=tail(proc.stderr),
                        exit_code=proc.exit_code, started=proc.started, ended=proc.ended)
        if proc.timed_out:
            res.status = "timeout"
            return res
        try:
            doc = parse_json_output(proc.stdout)
        except ValueError as exc:
            res.stderr = tail(f"{proc.stderr}\nstorlab: {exc}")
            return res
        records = job_records(doc)
        errors = [r.get("error", 0) for r in records if r.get("error", 0)]
        if proc.exit_code != 0 or not records or errors:
            if errors:
                res.stderr = tail(f"{proc.stderr}\nstorlab: fio job error {errors[0]}")
            return res
        res.metrics = summarize(records)
        if self.clients:
            by_host: dict[str, list[dict[str, Any]]] = {}
            for r in records:
                by_host.setdefault(str(r.get("hostname", "?")), []).append(r)
            res.rows = [{"host": h, **summarize(rs)} for h, rs in by_host.items()]
        res.status = "ok"
        return res


# ---------------------------------------------------------------------- parsing
def parse_json_output(text: str) -> dict[str, Any]:
    """The fio JSON document in `text`, skipping any warning text before, inside-line or
    after it. Raises ValueError when there is none."""
    dec = json.JSONDecoder()
    pos = 0
    best: dict[str, Any] | None = None
    while True:
        i = text.find("{", pos)
        if i < 0:
            break
        # A document starts a line; a `{` inside a warning message is skipped quickly.
        if i == 0 or text[i - 1] == "\n":
            try:
                doc, end = dec.raw_decode(text, i)
            except json.JSONDecodeError:
                pos = i + 1
                continue
            if isinstance(doc, dict) and ("jobs" in doc or "client_stats" in doc):
                best = doc
                break
            pos = end
        else:
            pos = i + 1
    if best is None:
        raise ValueError("no fio JSON document in the output")
    return best


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
    hosts: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        hosts.setdefault(str(r.get("hostname", "")), []).append(r)
    for key in ("usr_cpu", "sys_cpu"):
        per_host = [sum(float(r.get(key, 0.0)) for r in rs) for rs in hosts.values()]
        m[key] = sum(per_host) / len(per_host)
    return m


def _fio_percentile(table: Mapping[str, Any], p: float) -> float:
    for k, v in table.items():
        if abs(float(k) - p) < 1e-6:
            return float(v)
    return float("nan")


def _targets(opts: Mapping[str, Any]) -> list[str]:
    """The fio `filename` targets (several may be given, ':'-separated)."""
    names = str(opts.get("filename", "") or "")
    # fio escapes a literal ':' as '\:'; split on the others only.
    return [p.replace("\0", ":") for p in names.replace("\\:", "\0").split(":") if p]


def _block_devices(opts: Mapping[str, Any]) -> list[str]:
    """Block devices among the fio targets."""
    out = []
    for p in _targets(opts):
        try:
            if stat.S_ISBLK(os.stat(p).st_mode):
                out.append(p)
        except OSError:
            if p.startswith("/dev/"):  # a device node that may appear later: still refuse
                out.append(p)
    return out
