"""fio runner: one configuration -> one fio job -> parsed metrics.

Every fio option may be fixed in the constructor or supplied by the configuration (the
configuration wins). fio runs with `--output-format=json+` so that the latency histograms
come back: with several job records (numjobs without group_reporting, or several clients in
client/server mode) percentiles are recomputed from the merged histogram, never averaged.

Parsing is defensive: fio writes warnings into its JSON stream (axboe/fio#731, #1685), so
the document is located by decoding from each line that starts with `{`.
"""

from __future__ import annotations

import functools
import glob
import itertools
import os
import re
import shutil
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..spec import CampaignError
from ._program import ask_program, render_value, run_program, tail, write_run_file
from ._sandbox import current
from .base import RunResult, find_json
from ...fileio import within
from ...units import fio_value

#: Percentiles reported, as (fio key, metric suffix).
PERCENTILES: tuple[tuple[float, str], ...] = (
    (50.0, "p50"), (95.0, "p95"), (99.0, "p99"), (99.9, "p99_9"))
DIRECTIONS = ("read", "write")
#: Engines whose target is not a local file (no default scratch directory for them).
REMOTE_ENGINES = {"rbd", "rados", "http", "net", "netsplice", "nfs", "libcufile", "nbd"}
#: Engines that talk over the network (a run with one shares the host's network; the
#: sandbox gives other runs a network namespace of their own).
NETWORK_ENGINES = REMOTE_ENGINES - {"libcufile"} | {"libiscsi", "rdma", "gfapi",
                                                   "gfapi_async", "dfs", "libhdfs"}
#: Engines that make io_uring rings (the sandbox refuses rings to other programs: their
#: operations pass round the seccomp filter). fio's io_uring engines issue reads, writes,
#: syncs and, `io_uring_cmd`, passthrough commands on the files fio opened itself (through
#: the walls: only declared device nodes exist in the sandbox's /dev); no option makes them
#: open, make a socket or connect.
IO_URING_ENGINES = frozenset({"io_uring", "io_uring_cmd", "xnvme", "libblkio"})
#: fio options that run a program (`exec_prerun`, `exec_postrun`: system(3); the
#: command-line triggers' commands). A program fio starts inherits fio's seccomp filter,
#: so it would get what storlab grants fio itself for its engine (Unix sockets for
#: `protocol=unix`, rings for an io_uring engine, the host's network for a network engine
#: or client mode): refused in such a job unless the
#: campaign declares that grant (`FioRunner.refused_grant`).
PROGRAM_OPTIONS = ("exec_prerun", "exec_postrun", "trigger", "trigger-remote")
#: A Ceph cluster's TCP ports (its monitors' msgr2 and msgr1, its daemons' default
#: `ms_bind_port_min`..`ms_bind_port_max`): fio's rbd and rados engines reach them.
CEPH_PORTS = (3300, 6789, *range(6800, 7301))
#: Constructor keywords that configure the runner rather than fio.
RUNNER_KEYS = ("fio", "clients", "allow_destructive", "job_name", "extra_args", "job_file")

#: fio options that name the files a job opens (and may create or overwrite).
TARGET_OPTIONS = ("filename", "directory", "filename_format", "opendir")
#: fio options that name one file fio writes as given (an I/O log, fio's own output).
WRITTEN_FILES = ("write_iolog", "output")
#: fio options whose value is a prefix: fio writes `<prefix>_bw.<jobnum>.log` and the like.
LOG_PREFIXES = ("write_bw_log", "write_lat_log", "write_iops_log", "write_hist_log")
#: fio's command-line options (`fio --help`, fio 3.33): not job options; they belong in
#: `extra_args`, where fio reads them before the job (as runner options or factors they
#: would land after `--name` on fio's command line).
COMMAND_LINE_ONLY = frozenset((
    "debug", "parse-only", "merge-blktrace-only", "output", "bandwidth-log", "minimal",
    "output-format", "terse-version", "version", "help", "cpuclock-test", "crctest",
    "cmdhelp", "enghelp", "showcmd", "eta", "eta-newline", "eta-interval",
    "status-interval", "readonly", "section", "alloc-size", "warnings-fatal", "max-jobs",
    "server", "daemonize", "client", "remote-config", "idle-prof", "inflate-log",
    "trigger-file", "trigger-timeout", "trigger", "trigger-remote", "aux-path",
    "append-terse", "latency-log"))
#: Names whose abbreviations fio would also accept and storlab refuses.
GUARDED = (*TARGET_OPTIONS, "name", *WRITTEN_FILES, *LOG_PREFIXES)
#: fio's default file name when no `filename` is given.
DEFAULT_FORMAT = "$jobname.$jobnum.$filenum"
#: How many existing paths a wildcard target (filename_format) or an opendir tree may
#: match before storlab stops looking and refuses (bounded work at preflight).
MAX_MATCHES = 10000
#: How deep a tree fio's `opendir` names may be for storlab to check it.
MAX_OPENDIR_DEPTH = 256
_OPTION_NAME = re.compile(r"[a-z][a-z0-9_-]*")
#: Harmless sinks and sources fio may name outside the scratch area.
HARMLESS = ("/dev/null", "/dev/zero")
_UNKNOWN = re.compile(r"unrecognized option '--([^'=]+)|option '--([^'=]+)[^']*' is ambiguous")
_TOKENS = re.compile(r"\$(jobname|jobnum|filenum|clientuid)", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

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

    @staticmethod
    def prepare_options(options: dict[str, Any], directory: Path
                        ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A campaign's options as its runs use them, and what the measurement records
        beside them: a .fio file beside the campaign is read here into plain options (the
        runner's own override it), so workers on other hosts need no copy, what runs is
        what the target guard checked, and an edited file is another measurement."""
        opts = dict(options)
        j = opts.get("job_file")
        if not isinstance(j, str):
            return opts, {}
        del opts["job_file"]
        job = read_job_file(directory / j, home=directory)
        return {**job, **opts}, {"job_file_options": dict(job)}

    @staticmethod
    def document(raw: str | None) -> dict[str, Any] | None:
        """fio's own JSON document of a run (warnings around it stripped), for fio-plot and
        scripts; None when the output holds none."""
        try:
            return parse_json_output(raw or "")
        except ValueError:
            return None

    def __init__(self, fio: str = "fio", clients: Sequence[str] | None = None,
                 allow_destructive: bool = False, job_name: str = "storlab",
                 extra_args: Sequence[str] = (), job_file: str | Path | None = None,
                 **options: Any) -> None:
        self.fio = fio
        self.job_file = Path(job_file) if job_file is not None else None
        self.clients = [str(c) for c in (clients or [])]
        self.allow_destructive = bool(allow_destructive)
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(job_name)):
            raise CampaignError(f"fio runner: job_name {job_name!r} must be letters, digits, "
                                "'_', '.' or '-'")
        self.job_name = str(job_name)
        self.extra_args = [str(a) for a in extra_args]
        # An existing .fio job file is the base job: its options come first, the runner's
        # options and then each configuration's factors override them. It is read here,
        # once, into ordinary options, so the target guard and fio's name check see every
        # one of them (fio itself never reads the file).
        base = read_job_file(self.job_file) if self.job_file is not None else {}
        self.options = {**base, **dict(options)}
        self._checked_names: set[frozenset[str]] = set()
        # (fio, PATH) -> the system's fio it resolved to, checked (None: not the system's)
        self._system_fio: tuple[tuple[str, str | None], str | None] | None = None
        for k, v in _parse_extra_args(self.extra_args):
            _check_option(k, v, jobfile=False, where="extra_args")

    def program(self) -> str:
        """The program started (its install tree is shown read-only)."""
        return self.fio

    # ------------------------------------------------------------------ job
    def job_options(self, config: Mapping[str, Any], workdir: Path, check: bool = True
                    ) -> dict[str, str]:
        """The fio options of one run: fixed, then the configuration's, then defaults.
        With `check`, names and values fio would read differently are refused."""
        # fio_value: fio's default mode reads "4KiB" as 4000 bytes; storlab (and the
        # analysis of these runs) reads 4096, so such values reach fio as bytes.
        opts = {k: _as_fio(k, render_value(v)) for k, v in self.options.items() if v is not None}
        opts.update({k: _as_fio(k, render_value(v)) for k, v in config.items() if v is not None})
        if check:
            for k, v in opts.items():
                _check_option(k, v, jobfile=bool(self.clients))
        engine = opts.get("ioengine", "")
        if not {"filename", "directory", "filename_format"} & opts.keys() \
                and engine not in REMOTE_ENGINES:
            opts["directory"] = str(workdir)  # the run's own scratch directory
        opts.setdefault("group_reporting", "1")
        return opts

    def metric_names(self) -> set[str]:
        """Every metric a run reports: storlab's (`summarize`) and fio's own names
        (`fio_named`); a tuning objective must be one of them."""
        names = {"total_iops", "total_bw_bytes", "usr_cpu", "sys_cpu"}
        for d in DIRECTIONS:
            names |= {f"{d}_iops", f"{d}_bw_bytes", f"{d}_clat_mean_us"}
            names |= {f"{d}_clat_{suffix}_us" for _, suffix in PERCENTILES}
        return names | set(FIO_NAMED)

    def check_target(self, config: Mapping[str, Any], base: Path | None = None,
                     workdir: Path | None = None, names: bool = True, files: bool = True
                     ) -> None:
        """Refuse, before fio runs, what fio would read differently from what storlab checks
        and, unless `allow_destructive`, any target that resolves to a block device (or a
        /dev node) or to an existing file outside `base`, the campaign's scratch area.

        Targets are resolved as fio resolves them (see `fio_targets`), in `workdir`, the
        directory fio runs in (default: a run directory under `base`). With `names`, also
        checks the option names against the installed fio (`check_option_names`). Without
        `files`, only devices are refused (right before each run: a file that an earlier
        run of the same campaign created is the campaign's own).

        Files named as fio names its own files when no name is given
        (`<job_name>.<jobnum>.<filenum>`) are fio's leftovers, not somebody's data: they
        are not refused (a campaign with `directory: /mnt/test` can resume).
        """
        root = Path(base).resolve() if base is not None else None
        if workdir is None:
            workdir = (root / "run") if root is not None else Path.cwd()
        workdir = Path(workdir).absolute()
        opts = self.job_options(config, workdir, check=True)
        if names:
            self.check_option_names(opts)
        if self.allow_destructive:
            return
        for cand in self.fio_targets(opts, workdir):
            _check_candidate(cand, root, remote=bool(self.clients), files=files)

    def fio_targets(self, opts: Mapping[str, str], workdir: Path) -> list[Candidate]:
        """Every path fio may open for these job options plus `extra_args`, a superset of
        what fio does (the order of options changes fio's joining, so every order is
        assumed): each `filename` entry (':'-separated, '\\:' escapes) in fio's working
        directory and under each `directory` entry (fio joins `directory/filename` even for
        an absolute filename); without `filename`, `filename_format` (default
        `$jobname.$jobnum.$filenum`, tokens case-insensitive) the same way with the numbers
        and `$clientuid` as wildcards; the regular files under `opendir`, as themselves and
        under each `directory`. Options given on the command line before the job
        (`extra_args`) are inherited by the job, so they count too."""
        values: dict[str, list[str]] = {k: [] for k in (*TARGET_OPTIONS, *WRITTEN_FILES,
                                                        *LOG_PREFIXES)}
        jobnames = {self.job_name}
        for k, v in [*_parse_extra_args(self.extra_args), *opts.items()]:
            if k == "name":
                jobnames.add(v)
            for t in _target_option(k):
                values[t].append(v)
            if k in WRITTEN_FILES or k in LOG_PREFIXES:
                values[k].append(v)
        dirs = [d for v in values["directory"] for d in _split_names(v)]
        bases = [(str(workdir), str(workdir))] + [(d, _join(workdir, d)) for d in dirs]
        out: list[Candidate] = []

        def under_all(name: str, pattern: bool, own: str = "") -> None:
            # A job file (client mode) is sorted by fio: `directory` always applies there;
            # on the command line it applies only to names given after it.
            if not (self.clients and dirs):
                out.append(Candidate(_join(workdir, name), pattern, name,
                                     relative=not Path(name).is_absolute(), own=own))
            out.extend(Candidate(_join(b, name, always=True), pattern, name,
                                 relative=not os.path.isabs(given), own=own)
                       for given, b in bases[1:])

        for v in values["filename"]:
            for name in _split_names(v):
                under_all(name, False)
        formats = list(values["filename_format"])
        if not values["filename"]:
            formats.append(DEFAULT_FORMAT)
        for f in formats:
            # fio's own naming for this job: `<job_name>.<jobnum>.<filenum>` files
            own = f.lower() == DEFAULT_FORMAT.lower() and jobnames == {self.job_name}
            under_all(_format_glob(f, jobnames), True, self.job_name if own else "")
        for k in LOG_PREFIXES:  # `<prefix>_<kind>.<jobnum>.log` in fio's working directory
            out.extend(Candidate(_join(workdir, glob.escape(v)) + "_*.log", True, v,
                                 relative=not os.path.isabs(v), option=k)
                       for v in values[k])
        for k in WRITTEN_FILES:  # written as named, in fio's working directory
            out.extend(Candidate(_join(workdir, v), False, v,
                                 relative=not os.path.isabs(v)) for v in values[k])
        for v in values["opendir"]:
            out.append(Candidate(_join(workdir, v), False, v, opendir=True,
                                 relative=not Path(v).is_absolute(),
                                 dirs=tuple(b for _, b in bases[1:])))
        return out

    def network_reason(self, opts: Mapping[str, str] | None = None) -> str | None:
        """Why this job needs the host's network (client mode, a network engine), or None;
        `opts`: a run's job options (default: the runner's own)."""
        if self.clients:
            return "fio client mode"
        given = [*_parse_extra_args(self.extra_args),
                 *(self.options if opts is None else opts).items()]
        engines = {str(v) for k, v in given if k == "ioengine"} & NETWORK_ENGINES
        if any(k == "protocol" and str(v) == "unix" for k, v in given):
            engines -= {"net", "netsplice"}  # a Unix socket: the sandbox's own, no network
        return f"ioengine {min(engines)}" if engines else None

    def network_ports(self, opts: Mapping[str, str] | None = None) -> tuple[int, ...]:
        """The TCP ports this job names, the only ones its fio (and what it starts) may bind
        or connect to when its network is the runner's implicit need (Landlock): each
        client's (`host,port`, fio's default 8765), a net engine's `port` (a range of
        `numjobs` ports from it, as fio uses) and the port in a `host/port[/proto]`
        `filename`, the port of an `nbd://`, `nfs://` or `iscsi://` address, http's 80 or
        443, Ceph's (3300, 6789, its daemons' 6800-7300) for the rbd and rados engines.
        An engine whose ports are not named here needs `sandbox.network: true`."""
        out: set[int] = set()
        for c in self.clients:
            c = str(c)
            if not c.startswith("sock:"):
                port = c.rsplit(",", 1)[1] if "," in c else "8765"
                out.update(_ports(port))
        given = self._given(opts)
        engines = {str(v) for k, v in given if k == "ioengine"}
        numjobs = max([int(v) for k, v in given if k == "numjobs" and str(v).isdigit()] + [1])
        for k, v in given:
            v = str(v)
            if k == "port":
                out.update(p + i for p in _ports(v) for i in range(min(numjobs, 4096)))
            elif k == "filename" and engines & {"net", "netsplice", "rdma"}:
                for name in _split_names(v):
                    parts = name.split("/")
                    if len(parts) > 1:
                        out.update(_ports(parts[1]))
            m = re.search(r"\b(nbd|nfs|iscsi)://\[?[^/\]]*?\]?:(\d+)", v)
            if m:
                out.update(_ports(m.group(2)))
        defaults = {"nbd": (10809,), "nfs": (2049, 111), "libiscsi": (3260,),
                    "http": (80, 443), "rbd": CEPH_PORTS, "rados": CEPH_PORTS}
        for e in engines:
            out.update(defaults.get(e, ()))
        return tuple(sorted(out))

    def _given(self, opts: Mapping[str, str] | None) -> list[tuple[str, str]]:
        return [*_parse_extra_args(self.extra_args),
                *(self.options if opts is None else opts).items()]

    def io_uring_reason(self, opts: Mapping[str, str] | None = None) -> str | None:
        """Why this job's fio makes io_uring rings (an io_uring engine), or None."""
        engines = {str(v) for k, v in self._given(opts) if k == "ioengine"} & IO_URING_ENGINES
        return f"ioengine {min(engines)}" if engines else None

    def unix_socket_reason(self, opts: Mapping[str, str] | None = None) -> str | None:
        """Why this job's fio makes Unix sockets of its own (the net engines with
        `protocol=unix`: its listener and its client, both in the sandbox; a client
        reaching its server by `sock:<path>`, a path the campaign also declares in
        `sandbox.sockets` for it to be there), or None."""
        if any(str(c).startswith("sock:") for c in self.clients):
            return "fio client mode, sock:"
        given = self._given(opts)
        if {str(v) for k, v in given if k == "ioengine"} & {"net", "netsplice"} and \
                any(k == "protocol" and str(v) == "unix" for k, v in given):
            return "ioengine net, protocol=unix"
        return None

    def system_fio(self) -> bool:
        """Whether `fio` resolves to the system's fio: a root-owned file under /usr not
        writable by others. Only that program gets fio's implicit grants (rings, Unix
        sockets): another one named in `fio:` is the campaign's and must declare them.
        Looked up once per `fio` and PATH (asked before the campaign and before each
        run); a root-owned file under /usr changes only by root's hand, and the runs start
        that file by its real path (`program`), not the name a link on PATH may lead
        elsewhere by now."""
        return self._checked_fio() is not None

    def program(self) -> str:
        """What the runs start: the system's fio as `system_fio` checked it (its real
        path), else `fio` as given."""
        return self._checked_fio() or self.fio

    def _checked_fio(self) -> str | None:
        key = (self.fio, os.environ.get("PATH"))
        if self._system_fio is None or self._system_fio[0] != key:
            self._system_fio = (key, _system_program(self.fio))
        return self._system_fio[1]

    def refused_grant(self, opts: Mapping[str, str], sockets: bool, io_uring: bool,
                      network: bool = False) -> str | None:
        """Why this job may not run as given, or None: storlab grants fio Unix sockets
        (`unix_socket_reason`), io_uring rings (`io_uring_reason`) or the host's network
        (`network_reason`: a network engine, client mode) implicitly (the campaign
        declares neither `sandbox.sockets` nor `sandbox.unix_sockets`, `sockets`, nor
        `sandbox.io_uring`, `io_uring`, nor `sandbox.network`, `network`), and an option
        would start a program
        (`PROGRAM_OPTIONS`, or an abbreviation fio accepts) or an `ioengine` value runs or
        loads code other than fio's own engines (`exec`, `external:`, a library path:
        `_loads_code`; libaio beside io_uring is fine), which would inherit that grant."""
        grants = [f"{why} gets {what}" for why, what, decl in (
            (self.unix_socket_reason(opts), "Unix sockets", sockets),
            (self.io_uring_reason(opts), "io_uring rings", io_uring),
            (self.network_reason(opts), "the host's network", network)) if why and not decl]
        if not grants:
            return None
        declare = ("sandbox.unix_sockets: true (or the socket paths in sandbox.sockets)"
                   if "Unix" in grants[0] else "sandbox.io_uring: true"
                   if "io_uring" in grants[0] else "sandbox.network: true")
        if not self.system_fio():
            return (f"fio: {self.fio!r} is not the system's fio (a root-owned program under "
                    f"/usr) and would get what storlab grants fio itself for this job "
                    f"({'; '.join(grants)}); declare {declare} in the campaign if it should "
                    "have it")
        what = self._starts_program(opts)
        if what is None:
            return None
        return (f"{what}, which would inherit what storlab grants fio itself for this "
                f"job ({'; '.join(grants)}); declare {declare} in the campaign if that "
                "program should have it, or drop the option")

    def _starts_program(self, opts: Mapping[str, str]) -> str | None:
        """The first option of this job that starts a program (`PROGRAM_OPTIONS`, or an
        abbreviation fio accepts) or runs or loads code other than fio's own engines
        (`exec`, `external:`, a library path: `_loads_code`), in words; None when none."""
        for k, v in self._given(opts):
            runs = [p for p in PROGRAM_OPTIONS if p.startswith(k)]
            if runs and (k in runs or not _exact_fio_option(k)):
                return f"fio option {k}={v!r} starts a program"
            if (k == "ioengine" or len(k) > 2 and "ioengine".startswith(k)
                    and not _exact_fio_option(k)) and _loads_code(str(v)):
                return f"fio option {k}={v!r} runs or loads code other than fio's engines"
        return None

    def refused_program_dir(self, opts: Mapping[str, str], workdir: Path,
                            writable: Sequence[str], allow: bool = False) -> str | None:
        """Why this job may not run as given, or None: an existing directory its options
        name (`directory`, a log prefix's or a `filename_format`'s directory, a `filename`
        that is a directory) opens writable to fio, and an option starting a program
        (`_starts_program`) would get it whole: an `exec_prerun` appended to a file in
        /var/spool/cron/crontabs or ~/.ssh. Allowed when that directory lies inside the
        run's directory `workdir` or a declared `writable` directory (real paths), or
        with `allow` (allow_destructive)."""
        if allow or self.allow_destructive:
            return None
        what = self._starts_program(opts)
        if what is None:
            return None
        own = [os.path.realpath(workdir), *writable]
        for t in self.sandbox_targets(opts, Path(workdir)):
            real = os.path.realpath(t)
            if os.path.isdir(real) and not any(within(real, d) for d in own):
                return (f"{what}, which would get the existing directory {t} that the job "
                        "names, writable whole (fio's own files and logs go there); declare "
                        "that directory in sandbox.writable if that program may write all "
                        "of it, or drop the option")
        return None

    def check_home(self, config: Mapping[str, Any], home: Path, workdir: Path) -> None:
        """Refuse a file fio would make directly in the campaign's directory `home` (beside
        the campaign file and the store), which the sandbox keeps read-only: every run
        would fail with `Read-only file system`. Called unless the campaign declares that
        directory writable or sets allow_destructive."""
        if self.allow_destructive:
            return
        home = Path(home).resolve()
        opts = self.job_options(config, Path(workdir).absolute(), check=False)
        for c in self.fio_targets(opts, Path(workdir).absolute()):
            if not c.pattern and not c.opendir and not os.path.lexists(c.path) \
                    and Path(os.path.realpath(os.path.dirname(c.path))) == home:
                raise CampaignError(
                    f"fio target {c.given} (as {c.path}) would be made directly in the "
                    "campaign's directory, which the sandbox keeps read-only (it holds the "
                    f"campaign file and the store); name it relative (made in each run's "
                    f"directory), or in a directory inside declared in sandbox.writable "
                    f"(data/{os.path.basename(c.path)})")

    def refused_new_file(self, config: Mapping[str, Any], workdir: Path,
                         writable: Sequence[str]) -> str | None:
        """Why a file this job would make is refused, or None: a file not made yet in an
        existing directory other than the run's directory `workdir` (the sandbox opens no
        such directory for it: the whole directory would be writable, another campaign's
        store or a ~/.ssh beside the file), unless that
        directory lies in a declared `writable` directory (real paths) or the runner sets
        allow_destructive (the directory then opens whole)."""
        if self.allow_destructive:
            return None
        workdir = Path(workdir).absolute()
        opts = self.job_options(config, workdir, check=False)
        given = [*_parse_extra_args(self.extra_args), *opts.items()]
        own = [os.path.realpath(workdir)]
        for c in self.fio_targets(opts, workdir):
            # `..` taken from the name: the run's directory may not be made yet
            path = os.path.normpath(c.path)
            if c.pattern or c.opendir or os.path.lexists(path):
                continue
            parent = os.path.dirname(path)
            real = os.path.realpath(parent)
            if not os.path.isdir(real) or any(within(real, d) for d in (*own, *writable)):
                continue
            option = next((k for k, v in given if k in WRITTEN_FILES and v == c.given),
                          "filename")
            return (f"fio option {option}: {c.given} (as {c.path}) is not made yet in the "
                    f"existing directory {parent}, which the sandbox does not open for it: "
                    "make the file first, or declare its directory in sandbox.writable")
        return None

    def sandbox(self, config: Mapping[str, Any], workdir: Path) -> tuple[list[str], bool]:
        """What this run's fio opens (the campaign's preflight checks it): (targets,
        allow_destructive). fio's alone: the campaign's steps get none of it."""
        workdir = Path(workdir).absolute()
        return (self.sandbox_targets(self.job_options(config, workdir, check=False), workdir),
                self.allow_destructive)

    def sandbox_targets(self, opts: Mapping[str, str], workdir: Path) -> list[str]:
        """The paths this job declares, for its sandbox (`_sandbox.walls_for` decides what
        opens): each target and written file fio may open, the directory of a wildcard
        (fio's own file names, log prefixes), each `directory` entry."""
        given = [*_parse_extra_args(self.extra_args), *opts.items()]
        out = [_join(workdir, d) for k, v in given
               if "directory" in _target_option(k) for d in _split_names(v)]
        written = {v for k, v in given if k in WRITTEN_FILES}
        for c in self.fio_targets(opts, workdir):
            if not self.allow_destructive and c.given in written and os.path.lexists(c.path):
                continue  # fio would replace it whole: only a new one is the campaign's
            out.append(os.path.dirname(c.path) if c.pattern else c.path)
        return [p for p in out if not glob.has_magic(p)]

    def check_option_names(self, opts: Mapping[str, str]) -> None:
        """Refuse option names the installed fio does not know (a typo would make fio
        fail every run, or worse, be read as an abbreviation of another option): fio's own
        parser decides (`fio --parse-only`), once per set of names. Skipped when fio is
        not installed here (the runs then report fio's own error)."""
        names = frozenset(opts)
        if names in self._checked_names:
            return
        self._checked_names.add(names)
        for k in opts:
            if not _OPTION_NAME.fullmatch(k):
                raise CampaignError(f"fio option name {k!r} is not a fio option name")
        exe = shutil.which(self.fio)
        if exe is None:
            return
        argv = [exe, "--parse-only", f"--name={self.job_name}",
                # no option that names a file: parsing must not touch any
                *(f"--{k}={v}" for k, v in opts.items() if k not in GUARDED)]
        p = ask_program(argv)  # in the sandbox: an `external:` engine is loaded to parse
        if p.timed_out:
            return
        if "not loadable" in p.stderr:  # an engine missing here may exist on the run hosts
            return
        m = _UNKNOWN.search(p.stderr)
        if m:
            hint = re.search(r"Did you mean (\S+)\?", p.stderr)
            raise CampaignError(f"fio option {m.group(1) or m.group(2)!r} is not an option of "
                                f"{exe} ({_fio_version(exe)})"
                                + (f"; did you mean {hint.group(1)!r}?" if hint else ""))

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
        return write_run_file(path, "\n".join(lines) + "\n")  # a step may have left a link

    # ------------------------------------------------------------------ run
    def run(self, config: Mapping[str, Any], workdir: Path, timeout: float | None = None
            ) -> RunResult:
        """Run fio once for `config` in `workdir` and parse what it printed."""
        workdir = Path(workdir).absolute()
        # Checked again here, in the directory fio runs in and after the setup steps: the
        # run's scratch area is the directory holding the runs' own directories.
        self.check_target(config, base=workdir.parent, workdir=workdir, names=False,
                          files=False)
        workdir.mkdir(parents=True, exist_ok=True)
        opts = self.job_options(config, workdir)
        decl = current()
        why = self.refused_grant(opts, bool(decl.sockets) or decl.unix_sockets, decl.io_uring,
                                 decl.network)
        if why is None and not decl.allow_destructive:  # as the campaign's preflight
            declared = [os.path.realpath(p) for p in decl.paths]
            why = (self.refused_new_file(config, workdir, declared)
                   or self.refused_program_dir(opts, workdir, declared))
        if why:
            raise CampaignError(why)
        jobfile = self.write_jobfile(opts, workdir / "job.fio") if self.clients else None
        argv = self.argv(opts, jobfile)
        argv[0] = self.program()  # the file checked for the grants, not a name on PATH
        proc = run_program(argv, cwd=workdir, timeout=timeout,
                           targets=self.sandbox_targets(opts, workdir),
                           allow_destructive=self.allow_destructive,
                           network=self.network_reason(opts) is not None,
                           ports=self.network_ports(opts),
                           unix_sockets=self.unix_socket_reason(opts) is not None,
                           io_uring=self.io_uring_reason(opts) is not None)
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
            if "error=Read-only file system" in proc.stderr:
                res.stderr = tail(f"{res.stderr}\nstorlab: the sandbox keeps that path "
                                  "read-only: a file fio makes opens with its directory only "
                                  "in the run's own directory (a relative name); elsewhere "
                                  "make the file first, or declare its directory in "
                                  "sandbox.writable (or allow_destructive: true)")
            return res
        res.metrics = {**summarize(records), **fio_named(records)}
        if self.clients:
            # one row per fio server: host AND port (two servers on one address are two)
            by_server: dict[tuple[str, Any], list[dict[str, Any]]] = {}
            for r in records:
                by_server.setdefault(_server_key(r), []).append(r)
            res.rows = [{"host": h, "port": port, **summarize(rs)}
                        for (h, port), rs in by_server.items()]
        res.status = "ok"
        return res


# ---------------------------------------------------------------------- job files
_SECTION = re.compile(r"^\[([^\]]*)\]$")


def _system_program(name: str) -> str | None:
    """The real path of the root-owned file under /usr that others cannot write which
    `name` resolves to on PATH (links followed), or None when it resolves to no such file."""
    exe = shutil.which(name)
    if exe is None:
        return None
    real = os.path.realpath(exe)
    try:
        st = os.stat(real)
    except OSError:
        return None
    ok = within(real, "/usr", strict=True) and st.st_uid == 0 and not st.st_mode & 0o022
    return real if ok else None


def _loads_code(engine: str) -> bool:
    """Whether an `ioengine` value runs or loads code other than fio's built-in engines:
    `exec` (a program), `external:<lib>` or a library path."""
    return engine == "exec" or engine.startswith("external") or "/" in engine


def read_job_file(path: str | Path, home: str | Path | None = None) -> dict[str, str]:
    """The options of an existing fio job file, as storlab's base job: `[global]` first,
    then its one job section (which wins). Read as fio reads it: blank lines and lines
    starting with ';' or '#' skipped, a value cut at ';' or '#', blanks around names and
    values stripped, a bare option (`time_based`) set to 1. Refused, naming the file and
    line: several job sections (storlab runs one job per run), `include` (a file storlab
    would not see), fio's command-line options, `name`, and anything fio would expand or
    read differently on a command line (`$` variables, control characters...). With `home`
    (the campaign's directory), the file opened must lie inside it, links followed (what
    was opened is checked, not the name): storlab, often root, would otherwise read
    somebody's file through a link the campaign planted and show its lines in its errors
    and its options in the store."""
    p = Path(path)
    # O_PATH: what the name leads to is looked at before it is opened for reading, so a
    # directory, a FIFO or a device (a watchdog, a tape) is refused, never opened
    try:
        pfd = os.open(p, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        raise CampaignError(f"fio job_file {p}: cannot read it ({exc.strerror or exc})"
                            ) from None
    try:
        if not stat.S_ISREG(os.fstat(pfd).st_mode):
            raise CampaignError(f"fio job_file {p}: not a regular file")
        if home is not None:
            real, top = os.readlink(f"/proc/self/fd/{pfd}"), os.path.realpath(home)
            if not within(real, top, strict=True):
                raise CampaignError(f"fio job_file {p}: leads outside the campaign's "
                                    f"directory {top} (to {real}); storlab reads a job file "
                                    "only inside it: copy the file there")
        try:  # the very file checked, through its descriptor
            fd = os.open(f"/proc/self/fd/{pfd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as fh:
                text = fh.read().decode("utf-8")
        except OSError as exc:
            raise CampaignError(f"fio job_file {p}: cannot read it ({exc.strerror or exc})"
                                ) from None
        except UnicodeDecodeError:
            raise CampaignError(f"fio job_file {p}: not UTF-8 text") from None
    finally:
        os.close(pfd)
    sections: dict[str, dict[str, str]] = {}
    jobs: list[str] = []
    current: dict[str, str] | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        where = f"fio job_file {p}, line {lineno}"
        if not line or line[0] in ";#":
            continue
        m = _SECTION.match(line)
        if m:
            name = m.group(1).strip()
            if name != "global":
                jobs.append(name)
                if len(jobs) > 1:
                    raise CampaignError(f"{where}: a second job [{name}] (after [{jobs[0]}]):"
                                        " storlab runs one fio job per run; keep one job "
                                        "section and share options through [global]")
            current = sections.setdefault(name, {})
            continue
        if line.startswith("include ") or line == "include":
            raise CampaignError(f"{where}: 'include' is refused: storlab checks the options "
                                "it reads, so put them in this file")
        if current is None:
            raise CampaignError(f"{where}: option {line!r} before any [section]")
        key, eq, value = line.partition("=")
        key = key.strip()
        value = re.split(r"[;#]", value, maxsplit=1)[0].strip() if eq else "1"
        if not _OPTION_NAME.fullmatch(key):
            raise CampaignError(f"{where}: {key!r} is not a fio option name")
        _check_option(key, value, jobfile=True, where=where)
        current[key] = value
    if not sections:
        raise CampaignError(f"fio job_file {p}: no [global] or job section")
    return {**sections.get("global", {}), **(sections[jobs[0]] if jobs else {})}


# ---------------------------------------------------------------------- parsing
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


#: fio options whose value is a time: a trailing m is minutes there ("runtime=1.5m"), not
#: mebibytes, so their values never go through the size conversion.
TIME_OPTIONS = frozenset({
    "runtime", "ramp_time", "startdelay", "thinktime", "thinktime_spin", "thinktime_iotime",
    "latency_target", "latency_window", "max_latency", "steadystate_duration",
    "steadystate_ramp_time", "ss_dur", "ss_ramp", "job_start_clock_id", "flow_sleep",
    "rate_cycle"})


def _as_fio(name: str, value: str) -> str:
    """`fio_value` for sizes; time-valued options as given."""
    return value if name in TIME_OPTIONS else fio_value(value)


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
        hosts.setdefault(_server_key(r), []).append(r)
    for key in ("usr_cpu", "sys_cpu"):
        per_host = [sum(float(r.get(key, 0.0)) for r in rs) for rs in hosts.values()]
        m[key] = sum(per_host) / len(per_host)
    return m


def _server_key(record: Mapping[str, Any]) -> tuple[str, Any]:
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


# ---------------------------------------------------------------------- targets
_VERSIONS: dict[str, str] = {}


def _fio_version(exe: str) -> str:
    if exe not in _VERSIONS:
        p = ask_program([exe, "--version"])
        out = "" if p.timed_out or p.exit_code != 0 else p.stdout.strip()
        _VERSIONS[exe] = out or "version unknown"
    return _VERSIONS[exe]


@dataclass(frozen=True)
class Candidate:
    """A path fio may open: `path` (absolute; a glob pattern when `pattern`), the value it
    came from, whether it was relative to fio's working directory, and for an `opendir`
    the `directory` entries fio prefixes to the files it finds there."""

    path: str
    pattern: bool
    given: str
    opendir: bool = False
    relative: bool = False
    dirs: tuple[str, ...] = ()
    own: str = ""  # with fio's default naming, the job name: `<own>.<n>.<m>` files are fio's
    option: str = "filename_format"  # what a pattern came from, for the message


def _abbreviated(name: str) -> tuple[str, ...]:
    """The guarded options `name` abbreviates (fio accepts unambiguous abbreviations on
    its command line), none when it is one or an option of its own (`direct`: an exact
    name wins over an abbreviation)."""
    if name in GUARDED:
        return ()
    hits = tuple(t for t in GUARDED if name and t.startswith(name))
    if hits and _exact_fio_option(name):
        return ()
    return hits


def _target_option(name: str) -> tuple[str, ...]:
    """The target options a name stands for: itself, or every one it abbreviates."""
    if name in TARGET_OPTIONS:
        return (name,)
    return tuple(t for t in _abbreviated(name) if t in TARGET_OPTIONS)


@functools.cache
def _exact_fio_option(name: str) -> bool:
    """Whether `name` is an option of fio in its own right (fio 3.33: only `direct` among
    the prefixes of the target options); the installed fio is asked as well."""
    if name in ("direct",):
        return True
    exe = shutil.which("fio")
    if exe is None or not _OPTION_NAME.fullmatch(name):
        return False
    p = ask_program([exe, f"--cmdhelp={name}"])
    return bool(re.search(rf"^\s*{re.escape(name)}\s*:", p.stdout, re.MULTILINE))


def _check_option(name: str, value: str, jobfile: bool, where: str = "fio option") -> None:
    """Refuse a name or value that fio would read differently from what storlab checks."""
    label = f"{where} {name}={value!r}"
    if name == "name" and where != "extra_args":
        raise CampaignError(f"{label}: 'name' starts another fio job; use the runner option "
                            "job_name")
    if name in COMMAND_LINE_ONLY and where != "extra_args":
        raise CampaignError(f"{label}: {name!r} is one of fio's command-line options, not a "
                            "job option; put it in extra_args (--name=value)")
    if _abbreviated(name):
        raise CampaignError(f"{label}: fio would read {name!r} as an abbreviation of "
                            f"{' or '.join(_abbreviated(name))}; write the option's full name")
    if _CONTROL.search(value):
        raise CampaignError(f"{label}: control characters (newline, tab...) are refused: "
                            "fio would not read the value as written")
    if name in GUARDED or jobfile:
        if ";" in value or "#" in value:
            raise CampaignError(f"{label}: fio reads ';' and '#' as the start of a comment "
                                "and would cut the value there; refused")
    if name in GUARDED:
        if value != value.strip() or re.search(r"\s:|:\s", value):
            raise CampaignError(f"{label}: blanks at the start or end of a name are refused "
                                "(fio strips some of them)")
    plain = _TOKENS.sub("", value) if name == "filename_format" else value
    if jobfile and "$" in plain:
        raise CampaignError(f"{label}: fio expands '$' (environment variables, $ncpus...) "
                            "in job files; refused in client mode")


def _parse_extra_args(args: Sequence[str]) -> list[tuple[str, str]]:
    """(name, value) of the options in `extra_args`, read as fio's getopt_long_only reads
    them (`-x`/`--x`, `=value` or the next argument). Job files (bare arguments) are
    refused: storlab could not check what they name."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-") or a in ("-", "--"):
            raise CampaignError(f"fio extra_args: {a!r} is not an option (job files and "
                                "bare values are refused: write --name=value, and put job "
                                "options in the runner options)")
        name, eq, value = a.lstrip("-").partition("=")
        if not eq and (name in GUARDED or _abbreviated(name)):
            if i + 1 >= len(args):
                raise CampaignError(f"fio extra_args: {a!r} needs a value")
            value = args[i + 1]
            i += 1
        for bad in ("client", "server", "remote-config", "daemonize"):
            if name and bad.startswith(name) and len(name) > 1:
                raise CampaignError(f"fio extra_args: {a!r}: client/server mode is set with "
                                    "the runner option clients")
        out.append((name, value))
        i += 1
    return out


def _split_names(value: str) -> list[str]:
    """fio's ':'-separated list (a '\\:' is a literal ':'; empty entries are skipped)."""
    parts = value.replace("\\:", "\0").split(":")
    return [p.replace("\0", ":") for p in parts if p]


def _join(base: Path | str, name: str, always: bool = False) -> str:
    """`name` in directory `base`: fio's `directory` joins with '/' even an absolute name
    (`always`); fio's working directory applies to relative names only."""
    if always:
        return f"{base}/{name}"
    return name if os.path.isabs(name) else f"{base}/{name}"


def _format_glob(fmt: str, jobnames: set[str]) -> str:
    """A `filename_format` as a glob pattern: the literal parts escaped, `$jobnum`,
    `$filenum` and `$clientuid` as wildcards. `$jobname` is known; with several job names
    (a `--name` in extra_args) it becomes a wildcard too."""
    parts = []
    pos = 0
    for m in _TOKENS.finditer(fmt):
        parts.append(glob.escape(fmt[pos:m.start()]))
        tok = m.group(1).lower()
        if tok == "jobname" and len(jobnames) == 1:
            parts.append(glob.escape(next(iter(jobnames))))
        else:
            parts.append("*")
        pos = m.end()
    parts.append(glob.escape(fmt[pos:]))
    return "".join(parts)


def _refuse_device(shown: str) -> CampaignError:
    return CampaignError(f"fio target {shown} is a block device (or a device node): fio "
                         "would overwrite it; set allow_destructive: true in the runner "
                         "options to allow it")


def _refuse_file(shown: str, root: Path | None) -> CampaignError:
    return CampaignError(f"fio target {shown} is an existing file outside the campaign "
                         f"directory's scratch area {root}: fio may overwrite it; set "
                         "allow_destructive: true in the runner options to allow it")


def _check_path(p: str, shown: str, root: Path | None, files: bool = True) -> None:
    """One concrete path: a block device (or a missing /dev node), a character device, or
    (with `files`) an existing file outside `root` is refused."""
    real = os.path.realpath(p)
    if real in HARMLESS:
        return
    try:
        st = os.stat(real)
    except OSError:
        if _may_become_device(real):
            raise _refuse_device(shown) from None  # a device node that may appear later
        return
    if stat.S_ISBLK(st.st_mode):
        raise _refuse_device(shown)
    if stat.S_ISDIR(st.st_mode):
        return
    if not stat.S_ISREG(st.st_mode) and (root is None or not within(real, root)):
        kind = {stat.S_IFSOCK: "a Unix socket", stat.S_IFIFO: "a named pipe (FIFO)"}.get(
            stat.S_IFMT(st.st_mode))
        if kind:
            raise CampaignError(f"fio target {shown} is {kind} outside the campaign "
                                f"directory's scratch area {root}: fio would open it as a "
                                "file; set allow_destructive: true in the runner options to "
                                "allow it")
        raise _refuse_device(shown)  # a character device (/dev/sg0, /dev/ng0n1...)
    if files and root is not None and not within(real, root):
        raise _refuse_file(shown, root)
    if files and st.st_nlink > 1:  # a hard link: the same bytes live outside too
        raise CampaignError(f"fio target {shown} has {st.st_nlink} hard links (its data may "
                            "be somebody's file elsewhere); set allow_destructive: true in "
                            "the runner options to allow it")


def _may_become_device(path: str) -> bool:
    """Whether a missing `path` (resolved; may hold wildcards) would be a device node: it
    is under /dev and its nearest existing directory is on /dev's own file system (devtmpfs;
    /dev/shm, a tmpfs, holds ordinary files)."""
    if path != "/dev" and not path.startswith("/dev/"):
        return False
    parent = os.path.dirname(path)
    while parent and (glob.has_magic(parent) or not os.path.isdir(parent)):
        parent = os.path.dirname(parent)
    try:
        return os.stat(parent or "/").st_dev == os.stat("/dev").st_dev
    except OSError:
        return True


def _real_prefix(pattern: str) -> str:
    """`pattern` with its leading wildcard-free directories resolved as the kernel would
    (symbolic links, then '..' through directories that do not exist yet, such as the
    run's directory at preflight), the rest kept for glob."""
    parts = pattern.split("/")
    n = next((i for i, p in enumerate(parts) if glob.has_magic(p)), len(parts))
    head = os.path.realpath("/".join(parts[:n]) or "/")
    return "/".join([head.rstrip("/"), *parts[n:]]) if n < len(parts) else head


def _opendir_files(top: str, given: str) -> Iterable[str]:
    """The regular files fio's `opendir` adds: recursively, entries by lstat (symbolic
    links are skipped), as `dir/entry` strings. Iterative (an explicit stack) and bounded:
    a tree deeper than `MAX_OPENDIR_DEPTH`, a path past PATH_MAX, or more than
    `MAX_MATCHES` directories is refused (CampaignError naming `given`), not skipped."""
    stack = [(top, 0)]
    dirs = 0
    while stack:
        d, depth = stack.pop()
        dirs += 1
        if depth > MAX_OPENDIR_DEPTH or dirs > MAX_MATCHES:
            raise _opendir_too_big(given)
        try:
            entries = sorted(os.listdir(d))
        except OSError:
            continue
        subdirs = []
        for e in entries:
            full = f"{d}/{e}"
            if len(os.fsencode(full)) >= 4096:  # lstat would fail: refused, not skipped
                raise _opendir_too_big(given)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                yield full
            elif stat.S_ISDIR(st.st_mode):
                subdirs.append((full, depth + 1))
        stack.extend(reversed(subdirs))


def _opendir_too_big(given: str) -> CampaignError:
    return CampaignError(
        f"fio opendir {given}: a tree too deep or too large to check (more than "
        f"{MAX_OPENDIR_DEPTH} levels, {MAX_MATCHES} directories or 4096-byte paths); "
        "set allow_destructive: true")


def _check_candidate(c: Candidate, root: Path | None, remote: bool, files: bool = True
                     ) -> None:
    """Refuse a candidate target that is destructive (see `FioRunner.check_target`)."""
    if remote and files and (c.relative or root is None
                                 or not within(os.path.normpath(c.path), root)):
        raise CampaignError(
            f"fio target {c.given} (as {c.path}): in client/server mode the servers' files "
            "cannot be checked from here; keep targets inside the scratch area"
            + (f" {root}" if root else "") + " or set allow_destructive: true")
    if c.opendir:
        real = os.path.realpath(c.path)
        # fio names the files `<opendir value>/<entry>...`; walk the real directory
        given = c.given.rstrip("/") or "/"
        found_files = itertools.islice(_opendir_files(real, c.given), MAX_MATCHES)
        for i, found in enumerate(found_files):
            f = given + found[len(real):]
            if i + 1 >= MAX_MATCHES:
                raise CampaignError(f"fio opendir {c.given}: more than {MAX_MATCHES} files "
                                    "to check; set allow_destructive: true")
            if files and os.stat(found).st_nlink > 1:
                _check_path(found, f"{found} (opendir {c.given})", root, files)
            if files and (root is None or not within(real, root)):
                raise CampaignError(f"fio opendir {c.given} holds existing files outside the "
                                    f"campaign directory's scratch area {root} ({f}): fio "
                                    "would overwrite them; set allow_destructive: true in "
                                    "the runner options to allow it")
            for d in c.dirs:
                _check_path(f"{d}/{f}", f"{d}/{f} (opendir {c.given})", root, files)
        return
    if not c.pattern:
        _check_path(c.path, c.given if c.given == c.path else f"{c.given} (as {c.path})",
                    root, files)
        return
    pattern = _real_prefix(c.path)
    if _may_become_device(pattern):
        raise _refuse_device(f"{c.given} (as {c.path})")
    for i, p in enumerate(glob.iglob(pattern, include_hidden=True)):
        if i >= MAX_MATCHES:
            raise CampaignError(f"fio {c.option} {c.given}: more than {MAX_MATCHES} "
                                "existing paths match it; set allow_destructive: true")
        own = bool(c.own) and re.fullmatch(re.escape(c.own) + r"\.\d+\.\d+",
                                           os.path.basename(p)) is not None
        _check_path(p, f"{p} ({c.option} {c.given})", root, files and not own)


def _ports(value: str) -> list[int]:
    """The TCP port `value` names (a number 1-65535), or none."""
    value = value.strip()
    return [int(value)] if value.isdigit() and 0 < int(value) < 65536 else []
