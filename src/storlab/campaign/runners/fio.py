"""fio runner: one configuration -> one fio job -> parsed metrics.

Every fio option may be fixed in the constructor or supplied by the configuration (the
configuration wins). fio runs with `--output-format=json+` so that the latency histograms
come back (see `fio_parse`).

`FioRunner` is the face; each job is its own module: the options as fio reads them and the
command line (`fio_cmdline`), the paths a job opens and the refusal of destructive ones
(`fio_targets`), what a job is granted in the sandbox and what it may not do with it
(`fio_guard`), and fio's output read into metrics (`fio_parse`).
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..spec import CampaignError
from . import fio_cmdline as cmdline
from . import fio_guard as guard
from . import fio_parse as parse
from . import fio_targets as targets
from ._program import make_run_dir, run_program, tail
from ._sandbox import (SYSTEM_TREES, current, declared, held_within, open_plain,
                       refused_readable)
from .base import RunResult, option_bool
from .fio_cmdline import check_option, parse_extra_args, read_job_file
from .fio_parse import fio_named, job_records, parse_json_output, server_key, summarize
from .fio_targets import Candidate

#: Constructor keywords that configure the runner rather than fio.
RUNNER_KEYS = ("fio", "clients", "allow_destructive", "job_name", "extra_args", "job_file")


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
        fio = opts.get("fio")
        job = read_job_file(directory / j, home=directory,
                            fio=fio if isinstance(fio, str) and fio else "fio")
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
        self.allow_destructive = option_bool("allow_destructive", allow_destructive)
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(job_name)):
            raise CampaignError(f"fio runner: job_name {job_name!r} must be letters, digits, "
                                "'_', '.' or '-'")
        self.job_name = str(job_name)
        self.extra_args = [str(a) for a in extra_args]
        #: variables fio's environment gets besides the operator's (the ceph runner's
        #: CEPH_CONF: librados finds the cluster through it); storlab's own stays as it is
        self.env: dict[str, str] = {}
        # An existing .fio job file is the base job: its options come first, the runner's
        # options and then each configuration's factors override them. It is read here,
        # once, into ordinary options, so the target guard and fio's name check see every
        # one of them (fio itself never reads the file).
        base = read_job_file(self.job_file, fio=self.fio) if self.job_file is not None else {}
        self.options = {**base, **dict(options)}
        self._checked_names: set[frozenset[str]] = set()
        # (fio, PATH) -> the system's fio it resolved to, checked (None: not the system's)
        self._system_fio: tuple[tuple[str, str | None], str | None] | None = None
        for k, v in parse_extra_args(self.extra_args):
            check_option(k, v, jobfile=False, where="extra_args", fio=self.fio)

    def job_options(self, config: Mapping[str, Any], workdir: Path, check: bool = True
                    ) -> dict[str, str]:
        """The fio options of one run: fixed, then the configuration's, then defaults.
        With `check`, names and values fio would read differently are refused."""
        return cmdline.job_options(self, config, workdir, check)

    def metric_names(self) -> set[str]:
        """Every metric a run reports: storlab's (`summarize`) and fio's own names
        (`fio_named`); a tuning objective must be one of them."""
        return parse.metric_names()

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
        why = guard.refused_client_option(self, opts)
        if why:
            raise CampaignError(why)
        if self.allow_destructive:
            return
        for cand in self.fio_targets(opts, workdir):
            targets.check_candidate(cand, root, remote=bool(self.clients), files=files)

    def fio_targets(self, opts: Mapping[str, str], workdir: Path) -> list[Candidate]:
        """Every path fio may open for these job options plus `extra_args`
        (`fio_targets.candidates`)."""
        return targets.candidates(self, opts, workdir)

    # ------------------------------------------------------------------ sandbox
    def network_reason(self, opts: Mapping[str, str] | None = None) -> str | None:
        """Why this job needs the host's network (client mode, a network engine), or None;
        `opts`: a run's job options (default: the runner's own)."""
        return guard.network_reason(self, opts)

    def network_ports(self, opts: Mapping[str, str] | None = None) -> tuple[int, ...]:
        """The TCP ports this job names, the only ones its fio may bind or connect to when
        its network is the runner's implicit need (`fio_guard.network_ports`)."""
        return guard.network_ports(self, opts)

    def starts_programs_reason(self, opts: Mapping[str, str] | None = None) -> str | None:
        """Why this job's fio may start other programs (an option that starts or loads
        one: `fio_guard.starts_program`), or None: it executes nothing but its own files
        (the sandbox's execute rules)."""
        return guard.starts_program(self, opts)

    def io_uring_reason(self, opts: Mapping[str, str] | None = None) -> str | None:
        """Why this job's fio makes io_uring rings (an io_uring engine), or None."""
        return guard.io_uring_reason(self, opts)

    def realtime_reason(self, opts: Mapping[str, str] | None = None) -> str | None:
        """Why this job's fio raises its priority (CAP_SYS_NICE), or None
        (`fio_guard.realtime_reason`)."""
        return guard.realtime_reason(self, opts)

    def lockmem_reason(self, opts: Mapping[str, str] | None = None) -> str | None:
        """Why this job's fio locks memory past its RLIMIT_MEMLOCK (CAP_IPC_LOCK), or None
        (`fio_guard.lockmem_reason`)."""
        return guard.lockmem_reason(self, opts)

    def unix_socket_reason(self, opts: Mapping[str, str] | None = None) -> str | None:
        """Why this job's fio makes Unix sockets of its own, or None
        (`fio_guard.unix_socket_reason`)."""
        return guard.unix_socket_reason(self, opts)

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
            self._system_fio = (key, guard.system_program(self.fio))
        return self._system_fio[1]

    def refused_grant(self, opts: Mapping[str, str], sockets: bool, io_uring: bool,
                      network: bool = False) -> str | None:
        """Why this job may not run as given (an implicit grant a program it starts would
        inherit, or a fio that is not the system's: `fio_guard.refused_grant`; a service
        of this host where its network engine connects: `fio_guard.refused_local_service`),
        or None. Asked before any run and right before each fio start."""
        return (guard.refused_grant(self, opts, sockets, io_uring, network)
                or guard.refused_local_service(self, opts, network))

    def refused_program_dir(self, opts: Mapping[str, str], workdir: Path,
                            writable: Sequence[str], allow: bool = False) -> str | None:
        """Why this job may not run as given (an existing directory handed whole to a
        program fio starts), or None (`fio_guard.refused_program_dir`)."""
        return guard.refused_program_dir(self, opts, workdir, writable, allow)

    def check_home(self, config: Mapping[str, Any], home: Path, workdir: Path) -> None:
        """Refuse a file fio would make directly in the campaign's directory `home`, which
        the sandbox keeps read-only (`fio_guard.check_home`)."""
        guard.check_home(self, config, home, workdir)

    def refused_outside_target(self, config: Mapping[str, Any], workdir: Path,
                               home: str | Sequence[str]) -> str | None:
        """Why a target of this job lies outside the campaign's directory `home` without
        allow_destructive, or None (`fio_guard.refused_outside_target`); so does a file
        fio reads into what it writes or sends (`fio_guard.refused_loaded_file`)."""
        return (guard.refused_outside_target(self, config, workdir, home)
                or guard.refused_loaded_file(self, config, workdir, home))

    def refused_new_file(self, config: Mapping[str, Any], workdir: Path,
                         writable: Sequence[str]) -> str | None:
        """Why a file this job would make is refused (not made yet in an existing directory
        the sandbox does not open for it), or None (`fio_guard.refused_new_file`)."""
        return guard.refused_new_file(self, config, workdir, writable)

    def sandbox(self, config: Mapping[str, Any], workdir: Path) -> tuple[list[str], bool]:
        """What this run's fio opens (the campaign's preflight checks it): (targets,
        allow_destructive). fio's alone: the campaign's steps get none of it."""
        workdir = Path(workdir).absolute()
        return (self.sandbox_targets(self.job_options(config, workdir, check=False), workdir),
                self.allow_destructive)

    def sandbox_targets(self, opts: Mapping[str, str], workdir: Path) -> list[str]:
        """The paths this job declares, for its sandbox (`fio_targets.sandbox_targets`)."""
        return targets.sandbox_targets(self, opts, workdir)

    # ------------------------------------------------------------------ command line
    def check_option_names(self, opts: Mapping[str, str]) -> None:
        """Refuse option names the installed fio does not know, once per set of names
        (`fio_cmdline.check_option_names`)."""
        cmdline.check_option_names(self, opts, self._checked_names)

    def argv(self, opts: Mapping[str, str], jobfile: Path | None = None) -> list[str]:
        """fio's command line: options as `--key=value` argv elements (no shell), or a
        job file for client/server mode (fio sends job files to its servers)."""
        return cmdline.argv(self, opts, jobfile)

    def write_jobfile(self, opts: Mapping[str, str], path: Path) -> Path:
        """The job file of client/server mode at `path`."""
        return cmdline.write_jobfile(self, opts, path)

    # ------------------------------------------------------------------ run
    def run(self, config: Mapping[str, Any], workdir: Path, timeout: float | None = None
            ) -> RunResult:
        """Run fio once for `config` in `workdir` and parse what it printed."""
        workdir = Path(workdir).absolute()
        # Checked again here, in the directory fio runs in and after the setup steps: the
        # run's scratch area is the directory holding the runs' own directories.
        self.check_target(config, base=workdir.parent, workdir=workdir, names=False,
                          files=False)
        make_run_dir(workdir)
        opts = self.job_options(config, workdir)
        decl = current()
        why = self.refused_grant(opts, bool(decl.sockets) or decl.unix_sockets, decl.io_uring,
                                 decl.network)
        if why is None and not decl.allow_destructive:  # as the campaign's preflight
            declared = [os.path.realpath(p) for p in decl.paths]
            why = (self.refused_new_file(config, workdir, declared)
                   or self.refused_program_dir(opts, workdir, declared)
                   or (self.refused_outside_target(config, workdir, decl.homes)
                       if decl.homes else None))
            reason = None if decl.may_make_unix_sockets else self.unix_socket_reason(opts)
            if why is None and reason:  # /run shown with fio's own Unix sockets
                why = refused_readable(decl.readable, decl.network, False,
                                       f"the runner's fio ({reason})", homes=decl.homes)
        if why:
            raise CampaignError(why)
        jobfile = self.write_jobfile(opts, workdir / "job.fio") if self.clients else None
        argv = self.argv(opts, jobfile)
        argv[0] = self.program()  # the file checked for the grants, not a name on PATH
        proc = run_program(argv, cwd=workdir, timeout=timeout, env=self.env or None,
                           targets=self.sandbox_targets(opts, workdir),
                           allow_destructive=self.allow_destructive,
                           network=self.network_reason(opts) is not None,
                           ports=self.network_ports(opts),
                           unix_sockets=self.unix_socket_reason(opts) is not None,
                           io_uring=self.io_uring_reason(opts) is not None,
                           # fio alone executes, unless its options say it starts a program
                           executables=None if self.starts_programs_reason(opts)
                           else [argv[0]])
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
                by_server.setdefault(server_key(r), []).append(r)
            res.rows = [{"host": h, "port": port, **summarize(rs)}
                        for (h, port), rs in by_server.items()]
        res.status = "ok"
        return res



#: Where a server's directory never is: the system's trees and daemons' state.
SERVER_DIR_REFUSED = (*SYSTEM_TREES, "/boot", "/dev", "/proc", "/run", "/var/lib", "/var/log",
                      "/var/spool", "/var/cache", "/var/mail")
#: Below this uid an account is the system's (a daemon's: ceph, postgres, polkitd): the
#: server never runs as one, nor in a directory such an account owns.
FIRST_USER_UID = 1000


def _server_dir(scratch: Path) -> tuple[str, int]:
    """`scratch` (absolute, as given) and a descriptor of it opened one component at a time
    without following a link: the server runs as the owner of what that descriptor holds
    and is bound from it, never by the name again. Refused (CampaignError): a link on the
    way (its target's owner would become the server's account, its target writable), not
    a directory, a directory in the system's trees, or one a system account owns."""
    path = os.path.abspath(scratch)
    fd = open_plain(path)
    if fd is None:
        raise CampaignError(f"fio-server --dir {scratch}: " + (
            "reached through a symbolic link; give the real path of a directory"
            if os.path.isdir(path) else "not an existing directory"))
    st = os.fstat(fd)
    bad = ""
    if stat.S_ISLNK(st.st_mode):
        bad = "a symbolic link (give the real path of a directory)"
    elif not stat.S_ISDIR(st.st_mode):
        bad = "not a directory"
    elif held_within(fd, SERVER_DIR_REFUSED):
        # judged where the descriptor leads (the kernel's name): `//var/log` is
        # `/var/log`, which a comparison of the text given missed
        bad = "inside the system's trees"
    elif os.geteuid() == 0 and 0 < st.st_uid < FIRST_USER_UID:
        bad = f"owned by system account uid {st.st_uid}"
    if bad:
        os.close(fd)
        raise CampaignError(f"fio-server --dir {scratch}: {bad}; the server runs as the "
                            "directory's owner with it writable: use a directory of an "
                            "unprivileged account (e.g. chown nobody:nogroup DIR)")
    return path, fd


def _server_account(scratch: Path, devices: Sequence[str], fd: int) -> list[str]:
    """The `setpriv` words that make the server the owner of the directory `fd` (its uid
    and group; never root), with no capability left and the groups of the `devices` only
    (what lets it open them); [] when storlab is not root (the server is then its user).
    Raises CampaignError when `scratch` is root's or a device gives its group no access."""
    if os.geteuid() != 0:
        return []
    st = os.fstat(fd)
    if st.st_uid == 0:
        raise CampaignError(f"fio-server --dir {scratch}: owned by root; the server runs "
                            "as the directory's owner, never as root: chown it to an "
                            "unprivileged account (e.g. chown nobody:nogroup DIR)")
    try:
        import pwd

        gid = pwd.getpwuid(st.st_uid).pw_gid
    except KeyError:
        gid = st.st_gid
    groups = []
    for d in devices:
        ds = os.stat(d)
        if ds.st_mode & 0o006 == 0o006 or ds.st_uid == st.st_uid and ds.st_mode & 0o600 == 0o600:
            continue  # open to everyone (/dev/null) or the account's own
        if ds.st_gid == 0 or ds.st_mode & 0o060 != 0o060:
            raise CampaignError(f"fio-server --device {d}: mode {ds.st_mode & 0o777:o} "
                                f"group {ds.st_gid}: the unprivileged server opens a "
                                "device through its (non-root) group's read and write "
                                "bits")
        groups.append(ds.st_gid)
    setpriv = guard.system_program("setpriv")
    if setpriv is None:
        raise CampaignError("fio-server: no system setpriv (util-linux), which drops the "
                            "server's root")
    keep = ",".join(str(g) for g in sorted(set(groups)))
    return [setpriv, f"--reuid={st.st_uid}", f"--regid={gid}",
            f"--groups={keep}" if keep else "--clear-groups",
            "--inh-caps=-all", "--"]


def server_address(bind: str) -> str:
    """fio's `--server` words for `bind` (an IPv4 or IPv6 address): `ip:` or `ip6:`.
    Raises CampaignError when `bind` is no address."""
    try:
        addr = ipaddress.ip_address(bind)
    except ValueError:
        raise CampaignError(f"fio-server --bind {bind!r}: not an address (IPv4 or IPv6)") from None
    return f"{'ip6' if addr.version == 6 else 'ip'}:{addr}"


def device_node(d: str) -> str:
    """`d`'s real path when it is a block or character device node under /dev; raises
    CampaignError otherwise."""
    real = os.path.realpath(d)
    try:
        mode = os.stat(real).st_mode
    except OSError as exc:
        raise CampaignError(f"fio-server --device {d}: {exc.strerror}") from None
    if not (real.startswith("/dev/") and (stat.S_ISBLK(mode) or stat.S_ISCHR(mode))):
        raise CampaignError(f"fio-server --device {d}: not a block or character device "
                            "node under /dev")
    return real


def serve_fio(scratch: Path, bind: str, port: int, devices: Sequence[str] = (),
              connect_ports: Sequence[int] = (), ceph: bool = False,
              io_uring: bool = False, announce: Callable[[str], None] | None = None
              ) -> tuple[int | None, str]:
    """Run `fio --server=ip:bind,port` in the walls local runs get, until it ends: the
    system's fio as the owner of `scratch` (an existing directory, its working directory,
    writable; never root: no capability, no group but the `devices`' own), the smaller
    root read-only, a private /dev holding only `devices` (writable), the host's network
    held by Landlock to TCP on `port` and `connect_ports` (and a Ceph cluster's,
    `guard.CEPH_PORTS`, with `ceph`: the rbd/rados engines), io_uring
    rings only with `io_uring`; `announce` gets one line once every option is checked.
    fio's protocol has no authentication: whoever reaches the
    port runs jobs, as that account, against what it may open. Returns (exit code, the
    tail of its output)."""
    exe = guard.system_program("fio")
    if exe is None:
        raise CampaignError("fio-server: no system fio (a root-owned /usr file on PATH)")
    where = server_address(bind)
    path, fd = _server_dir(scratch)
    try:
        nodes = [device_node(d) for d in devices]
        account = _server_account(scratch, nodes, fd)
        st = os.fstat(fd)
        if announce is not None:
            user = f"uid {st.st_uid}" if account else "this user"
            announce(f"fio server on {where},{port} in its walls as {user}: writable "
                     f"{path}; devices {', '.join(nodes) or 'none'}")
        # bound from the descriptor checked above: DIR swapped for a link meanwhile (its
        # owner may rename it) does not move the server
        with declared(current().holding(path, fd)):
            proc = run_program([*account, exe, f"--server={where},{port}"], cwd=path,
                               timeout=None, targets=nodes, allow_destructive=bool(nodes),
                               network=True, io_uring=io_uring,
                               ports=(port, *connect_ports,
                                      *(guard.CEPH_PORTS if ceph else ())),
                               # a client's job starts no program (exec_prerun, exec...)
                               executables=[exe])
    finally:
        os.close(fd)
    return proc.exit_code, tail(f"{proc.stdout}\n{proc.stderr}".strip())
