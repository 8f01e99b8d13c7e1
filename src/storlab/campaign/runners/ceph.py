"""ceph runner: per configuration, apply the design's Ceph parameters to a running
`storlab cluster up ceph`, wait for HEALTH_OK, then run the load.

    runner:
      type: ceph
      options:
        load: {type: fio, options: {ioengine: rbd, rw: randwrite, bs: 4k, iodepth: 16,
                                    runtime: 10, time_based: 1}}
        # or {type: rados_bench, options: {mode: write, seconds: 10, block_size: 4096,
        #                                  concurrency: 16}} or {type: objectstore, ...}

Factors Ceph knows (`ceph config help NAME`) are Ceph parameters; every other factor goes
to the load. A parameter is set with `ceph config set <who> NAME VALUE` (who: `client` for
objecter_* options, which the load's librados reads at connect; `osd` otherwise; override
with `who: {NAME: SECTION}`) only when its value changes; when Ceph says a changed parameter
cannot be updated at runtime, the OSDs are restarted (stopped and started by PID; they read
the mon's configuration database at start) before the health wait.

Ceph's daemons run as the `ceph` user in walls of their own (`clusters.ceph`), and some of
Ceph's options name a path or code for them (`osd_class_dir` and `erasure_code_dir` are directories of plugins they
load, `pid_file` a file they write and delete): a factor is taken as a Ceph parameter only
when Ceph's own schema (`ceph config help NAME`) says it is a number, a bool, a size or a
duration, or a string with `enum_values` that hold every level, and each level only in the
form that type takes, as `who` only as a Ceph section (`ceph_values`: the `ceph` CLI
reads a word starting with `-` as its own option). Any other (free-form
string, address, uuid) is refused before the first run, and again before it is set,
unless the campaign sets the runner's `allow_destructive: true` (its own, as fio's: the
preflight sees the runner's options; `sandbox.allow_destructive` is about the programs'
files and does not open this).
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..spec import CampaignError
from . import cluster_walls  # noqa: F401  (registers the walls Ceph's programs start in)
from ._program import render_value, run_program, tail
from ._sandbox import opened
from .base import RunResult, option_bool
from .ceph_values import OPTION_NAME, refused_value, refused_who
from .fio_guard import CEPH_PORTS

LOAD_TYPES = ("fio", "rados_bench", "objectstore")
RADOS_BENCH_OPTIONS = ("mode", "seconds", "block_size", "concurrency")
RADOS_BENCH_MODES = ("write", "seq", "rand")
#: rados bench's numeric options: the inclusive bounds storlab passes (seconds up to a day,
#: a block up to 1 GiB, up to 4096 operations in flight).
RADOS_BENCH_BOUNDS = {"seconds": (1, 86400), "block_size": (1, 1 << 30),
                      "concurrency": (1, 4096)}
_HELP: dict[tuple[str, str], dict[str, Any] | None] = {}
#: Ceph option types whose values are data for a daemon, never a path or code it uses.
DATA_TYPES = ("int", "uint", "float", "bool", "size", "secs", "millisecs")


class CephRunner:
    name = "ceph"

    def __init__(self, load: Mapping[str, Any] | None = None, cluster_dir: str | None = None,
                 who: Mapping[str, str] | None = None, health_timeout: float = 180,
                 settle: float = 0.0, allow_destructive: bool = False) -> None:
        load = dict(load or {"type": "rados_bench"})
        self.load_type = str(load.get("type", "rados_bench"))
        if self.load_type not in LOAD_TYPES:
            raise CampaignError(f"ceph runner: load type {self.load_type!r} must be one of "
                                f"{', '.join(LOAD_TYPES)}")
        self.load_options = dict(load.get("options") or {})
        unknown_keys = sorted(set(load) - {"type", "options"})
        if unknown_keys:
            raise CampaignError(f"ceph runner: load has unknown key(s) {unknown_keys} "
                                "(type, options)")
        if self.load_type == "rados_bench":
            bad = sorted(set(self.load_options) - set(RADOS_BENCH_OPTIONS))
            if bad:
                raise CampaignError(f"ceph runner: rados_bench option(s) {bad} unknown "
                                    f"(known: {', '.join(RADOS_BENCH_OPTIONS)})")
            why = refused_rados_bench(self.load_options)
            if why:
                raise CampaignError(f"ceph runner: load.options.{why}")
        elif self.load_type == "fio":
            from .fio import FioRunner

            FioRunner(**self.load_options)  # refuses bad extra_args and job names
        self.cluster_dir = cluster_dir
        # the object-store load, built once: it refuses bad options now, and the
        # campaign's preflight asks it where the load goes and writes (below)
        self._objstore: Any = None
        if self.load_type == "objectstore":
            from .objectstore import ObjectStoreRunner

            self._objstore = ObjectStoreRunner(**{"cluster": "ceph",
                                                  "cluster_dir": cluster_dir,
                                                  **self.load_options})
        self.who = {str(k): str(v) for k, v in (who or {}).items()}
        for name, section in self.who.items():  # they reach root's ceph argv
            why = refused_who(section)
            if why:
                raise CampaignError(f"ceph runner: options.who.{name}: {why}")
        self.health_timeout = float(health_timeout)
        self.settle = float(settle)
        self.allow_destructive = option_bool("allow_destructive", allow_destructive)

    # ------------------------------------------------------------------ parameters
    def _cluster(self) -> Any:
        from ...clusters import cluster_state, get_cluster

        cluster_state("ceph", self.cluster_dir)  # a clear error when none is up
        c = get_cluster("ceph", self.cluster_dir)
        c.check_daemons()  # a dead OSD would hang the load (librados waits for it)
        return c

    @staticmethod
    def describe(cluster: Any, name: str) -> dict[str, Any] | None:
        """Ceph's metadata of an option, or None if Ceph does not know the name (cached
        per process: a `ceph` call costs ~0.3 s of a shared CPU)."""
        from ...clusters import ClusterError

        if not OPTION_NAME.fullmatch(name):  # never a ceph CLI option, so a load option
            return None
        key = (str(cluster.conf), name)
        if key not in _HELP:
            try:
                _HELP[key] = cluster.ceph_json("config", "help", "--", name)
            except (ClusterError, ValueError):
                _HELP[key] = None
        return _HELP[key]

    def refused_parameter(self, cluster: Any, params: Mapping[str, Any]) -> str | None:
        """Why one of `params` (factors Ceph knows) may not reach the cluster's root
        daemons, or None: by the option's type in Ceph's schema, never by its name; and
        each value in the form that type takes (`refused_value`), whatever the runner's
        `allow_destructive`, as it is a word of root's `ceph` argv."""
        for name, value in params.items():
            meta = self.describe(cluster, name) or {}
            kind = str(meta.get("type", "?"))
            enum = [str(v) for v in meta.get("enum_values") or []]
            why = refused_value(kind, enum, render_value(value))
            if why:
                return f"factor {name}: {why}"
            if kind in DATA_TYPES or (kind == "str" and enum) or self.allow_destructive:
                continue
            return (f"factor {name}: a Ceph option of type {kind} that takes any value; "
                    "such options name paths and code for Ceph's daemons (a plugin "
                    "directory they load, a file they write and delete), so only numbers, "
                    "sizes, durations, bools and strings with "
                    "Ceph's enum_values are set; set runner.options.allow_destructive: true "
                    "to set it anyway")
        return None

    def check_target(self, config: Mapping[str, Any], base: Path | None = None,
                     workdir: Path | None = None) -> None:
        """Preflight (before any run): refuse a configuration whose Ceph parameters
        `refused_parameter` refuses, and a cluster directory storlab may not trust. With
        no cluster up, nothing more is known here: each run checks again before setting."""
        from ...clusters import ClusterError, get_cluster

        try:
            get_cluster("ceph", self.cluster_dir)  # the directory's trust check
        except ClusterError as exc:
            raise CampaignError(f"runner: options.cluster_dir: {exc}") from None
        if self.load_type == "rados_bench":  # its factors, whatever the cluster says
            why = refused_rados_bench({k: v for k, v in config.items()
                                       if k in RADOS_BENCH_OPTIONS}, "factor ")
            if why:
                raise CampaignError(f"runner: {why}")
        try:
            cluster = self._cluster()
        except ClusterError:
            return
        params = {k: v for k, v in config.items() if self.describe(cluster, k) is not None}
        why = self.refused_parameter(cluster, params)
        if why:
            raise CampaignError(f"runner: {why}")

    def section(self, name: str) -> str:
        return self.who.get(name) or ("client" if name.startswith("objecter_") else "osd")

    def apply(self, cluster: Any, params: Mapping[str, Any]) -> dict[str, float]:
        """Set the parameters that differ from the cluster's; restart OSDs if needed."""
        t0 = time.monotonic()
        restart = False
        changed = 0
        for name, value in params.items():
            meta = self.describe(cluster, name) or {}
            who = self.section(name)
            want = render_value(value)
            # checked before the run too; here again, next to the argv it guards
            bad_who = refused_who(who)
            why = f"factor {name}: {bad_who}" if bad_who else \
                self.refused_parameter(cluster, {name: value})
            if why:
                raise CampaignError(f"ceph runner: {why}")
            # `--` ends the CLI's own options: who, name and value are never read as one
            have = cluster.ceph("config", "get", "--", who, name).strip()
            if _same(have, want):
                continue
            cluster.ceph("config", "set", "--", who, name, want)
            changed += 1
            if who != "client" and not meta.get("can_update_at_runtime", True):
                restart = True
        restart_s = cluster.restart_osds(self.health_timeout) if restart else 0.0
        health_s = cluster.wait_healthy(self.health_timeout)
        if self.settle:
            time.sleep(self.settle)
        return {"ceph_changed": float(changed), "ceph_restarted": float(restart),
                "ceph_restart_s": restart_s, "ceph_apply_s": time.monotonic() - t0,
                "ceph_health_wait_s": health_s}

    # ------------------------------------------------------------------ run
    def run(self, config: Mapping[str, Any], workdir: Path, timeout: float | None = None
            ) -> RunResult:
        from ...errors import StorlabError

        started = time.time()
        try:
            cluster = self._cluster()
            params = {k: v for k, v in config.items() if self.describe(cluster, k) is not None}
            load_cfg = {k: v for k, v in config.items() if k not in params}
            why = self.refused_parameter(cluster, params)
            if why:
                return RunResult("failed", stderr=why, started=started, ended=time.time())
            info = self.apply(cluster, params)
        except StorlabError as exc:
            return RunResult("failed", stderr=str(exc), started=started, ended=time.time())
        try:
            st = cluster.state()
            if st is None:
                raise CampaignError(f"no ceph cluster is up in {cluster.dir}")
            conf, keyring = _cluster_files(cluster)
        except StorlabError as exc:
            return RunResult("failed", stderr=str(exc), started=started, ended=time.time())
        st = {**st, "conf": conf}  # the trusted directory's own conf, judged
        # the load talks to the cluster, with its conf and admin key (the cluster's
        # directory, with its daemons' admin sockets, stays hidden)
        with opened(network=True, readable=[conf, keyring], ports=_ceph_ports(conf)):
            res = self._load(st, load_cfg, workdir, timeout)
        res.metrics.update(info)
        res.started = started
        if res.ended < started:  # rados bench's results carry no times of their own
            res.ended = time.time()
        return res

    # The campaign's preflight asks these of every runner that has them: an object-store
    # load runs in storlab's own process, so its endpoint and records_dir are held before
    # any run as the objectstore runner's are (each run holds them again). Other loads
    # have nothing to answer here.
    def job_options(self, config: Mapping[str, Any], workdir: Path, check: bool = False
                    ) -> dict[str, Any]:
        """The object-store load's options of a run of `config` ({} for another load)."""
        return self._objstore.job_options(config, workdir, check) if self._objstore else {}

    def refused_grant(self, opts: Mapping[str, Any], sockets: bool, io_uring: bool,
                      network: bool) -> str | None:
        """Why the object-store load's endpoint is not declared, or None."""
        if self._objstore is None:
            return None
        why = self._objstore.refused_grant(opts, sockets, io_uring, network)
        return f"load: {why}" if why else None

    def refused_new_file(self, config: Mapping[str, Any], workdir: Path,
                         writable: Sequence[str]) -> str | None:
        """Why the object-store load's records may not be made in its records_dir, or None."""
        if self._objstore is None:
            return None
        why = self._objstore.refused_new_file(config, workdir, writable)
        return f"load: {why}" if why else None

    def network_reason(self) -> str:
        return "the ceph runner's load talks to its cluster"

    def _load(self, st: Mapping[str, Any], load_cfg: Mapping[str, Any], workdir: Path,
              timeout: float | None) -> RunResult:
        if self.load_type == "rados_bench":
            res = self._rados_bench(st, load_cfg, workdir, timeout)
        elif self.load_type == "fio":
            from .fio import FioRunner

            opts = {"ioengine": "rbd", "clientname": "admin", "pool": st["pool"],
                    "rbdname": st["image"], **self.load_options}
            fio = FioRunner(**opts)
            # librados (fio's rbd/rados engines) finds the cluster through CEPH_CONF: in
            # fio's environment only, never storlab's own
            fio.env = {"CEPH_CONF": str(st["conf"])}
            res = fio.run(load_cfg, workdir, timeout)
        else:
            res = self._objstore.run(load_cfg, workdir, timeout)
        return res

    def _rados_bench(self, st: Mapping[str, Any], cfg: Mapping[str, Any], workdir: Path,
                     timeout: float | None) -> RunResult:
        """`rados bench` (write, then seq/rand reads of what it wrote when asked)."""
        o = {"mode": "write", "seconds": 10, "block_size": 4096, "concurrency": 16,
             **self.load_options, **cfg}
        unknown = set(o) - set(RADOS_BENCH_OPTIONS)
        if unknown:
            return RunResult("failed", stderr=f"rados_bench: unknown option(s) {sorted(unknown)}")
        why = refused_rados_bench(o)  # checked before the runs; here again, by the argv
        if why:
            return RunResult("failed", stderr=f"rados_bench: {why}")
        base = ["rados", "-c", st["conf"], "-p", st["pool"], "bench",
                render_value(o["seconds"])]
        common = ["-t", render_value(o["concurrency"]), "--format", "json",
                  "--run-name", "storlab"]
        # Always --no-cleanup: rados bench prints its clean-up messages into the middle of
        # its JSON line; the objects are removed by `rados cleanup` below instead.
        runs = [("write", [*base, "write", "-b", render_value(o["block_size"]), *common,
                           "--no-cleanup"])]
        if o["mode"] in ("seq", "rand"):
            runs.append((o["mode"], [*base, o["mode"], *common]))
        metrics: dict[str, float] = {}
        raw, err = [], []
        for mode, argv in runs:
            out = run_program(argv, cwd=workdir, timeout=timeout)
            raw.append(out.stdout)
            err.append(out.stderr)
            if out.timed_out or out.exit_code != 0:
                return RunResult("timeout" if out.timed_out else "failed", raw="\n".join(raw),
                                 stderr=tail("\n".join(err)), exit_code=out.exit_code)
            metrics.update(parse_rados_bench(out.stdout, mode))
        run_program(["rados", "-c", st["conf"], "-p", st["pool"], "cleanup",
                     "--run-name", "storlab"], timeout=120)
        return RunResult("ok", metrics=metrics, raw="\n".join(raw), stderr=tail("\n".join(err)),
                         exit_code=0)


def refused_rados_bench(opts: Mapping[str, Any], label: str = "") -> str | None:
    """Why one of rados bench's options `opts` may not reach its argv, or None (each
    named `label` + its name): `mode` one of `RADOS_BENCH_MODES`, the others whole numbers
    within `RADOS_BENCH_BOUNDS` (a bool, a fraction or a word such as `--conf=...` is
    refused: rados reads a word starting with `-` as its own option)."""
    for name, value in opts.items():
        text = render_value(value)
        if name == "mode":
            if text not in RADOS_BENCH_MODES:
                return (f"{label}mode: {text!r} must be one of "
                        f"{', '.join(RADOS_BENCH_MODES)}")
            continue
        lo, hi = RADOS_BENCH_BOUNDS.get(name, (None, None))
        if lo is None:
            continue  # an unknown option: refused by name elsewhere
        if isinstance(value, bool) or not re.fullmatch(r"[0-9]{1,12}", text) \
                or not lo <= int(text) <= hi:
            shown = repr(value) if isinstance(value, bool) else repr(text)
            return f"{label}{name}: {shown} must be a whole number from {lo} to {hi}"
    return None


def parse_rados_bench(stdout: str, mode: str) -> dict[str, float]:
    """rados bench's JSON (last JSON line; every value is a string). Write mode's
    `stddev_iops` is garbage (an overflowed integer), so it is not reported."""
    doc = None
    # The JSON document may be cut by clean-up messages ("Removed N objects"): glue the
    # lines from the first '{' on, leaving those messages out.
    lines = stdout.strip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("{")]
    for i in reversed(starts):
        text = "".join(line for line in lines[i:]
                       if not line.startswith(("Removed ", "Clean up ", "hints = ")))
        try:
            doc = json.loads(text)
            break
        except ValueError:
            continue
    if doc is None:
        raise CampaignError("rados bench printed no JSON summary")
    prefix = "read" if mode in ("seq", "rand") else "write"

    def f(k: str) -> float:
        try:
            return float(doc[k])
        except (KeyError, TypeError, ValueError):
            return float("nan")
    out = {f"{prefix}_iops": f("average_iops"), f"{prefix}_bw_bytes": f("bandwidth") * 1e6,
           f"{prefix}_lat_mean_ms": f("average_latency") * 1e3,
           f"{prefix}_lat_max_ms": f("max_latency") * 1e3}
    if mode != "write":
        out[f"{prefix}_iops_stddev"] = f("stddev_iops")
    return out


def _same(have: str, want: str) -> bool:
    if have == want:
        return True
    try:
        return float(have) == float(want)
    except ValueError:
        return have.lower() in ("true", "false") and (have.lower() == "true") == (want == "1")


def _cluster_files(cluster: Any) -> tuple[str, str]:
    """The conf and admin keyring the load is shown read-only: the trusted cluster
    directory's own (`get_cluster`), each a regular file of it, not a link to another
    place. Refused (CampaignError) otherwise: a campaign may ship its cluster directory."""
    top = os.path.realpath(cluster.dir)
    out = []
    for path in (str(cluster.conf), str(cluster.dir / "admin.keyring")):
        try:
            st = os.lstat(path)
        except OSError as exc:
            raise CampaignError(f"ceph runner: {path}: {exc.strerror}") from None
        if (not stat.S_ISREG(st.st_mode)
                or os.path.dirname(os.path.realpath(path)) != top):
            raise CampaignError(f"ceph runner: {path} must be a regular file of the "
                                f"cluster's directory {top}, not a link or another file")
        out.append(path)
    return out[0], out[1]


def _ceph_ports(conf: str) -> tuple[int, ...]:
    """The TCP ports the load may reach (Landlock holds it to them): the monitors' ports
    its `conf` names (`mon host = v2:ip:port`) and Ceph's defaults (`CEPH_PORTS`)."""
    try:
        text = Path(conf).read_text(errors="replace")
    except OSError:
        text = ""
    mon = [int(p) for line in text.splitlines()
           if (m := re.match(r"\s*mon[ _]host\s*=(.*)", line))
           for p in _MON_ADDR.findall(m.group(1)) if 0 < int(p) < 65536]
    return tuple(sorted({*mon, *CEPH_PORTS}))


#: One monitor address of `mon host` (`v2:10.0.0.1:3300/0`, `[::1]:6789`, `host:6789`,
#: in a `[v2:...,v1:...]` list): its port is what follows the host, never an octet of it.
_MON_ADDR = re.compile(r"(?:^|(?<=[\s,\[]))(?:v[12]:)?(?:\[[0-9A-Fa-f:.%]+\]|[^\s,:\[\]/]+)"
                       r":(\d{1,5})(?:/\d+)?(?=$|[\s,\]])")
