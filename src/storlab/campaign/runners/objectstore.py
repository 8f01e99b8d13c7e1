"""objectstore runner: one configuration -> one object-store load (S3 or Swift API) ->
summary metrics, with every request kept.

    runner:
      type: objectstore
      options: {cluster: swift, api: swift, duration: 10, clients: 8, objects: 200,
                mix: {get: 70, put: 30}, sizes: "16k:0.8,1m:0.2"}

The target comes from a running `storlab cluster up` (`cluster: swift|ceph`, read from its
state file) or is given in full (`api`, `endpoint`, `access_key`, `secret_key` for S3;
`auth_url`, `user`, `key` for Swift). Any load option may be a factor of the design; the
factors `read_pct` (GET share of GET+PUT, 0-100) and `object_size`/`size` are shorthands.
Per-request records go to `RunResult.raw` as CSV (in the store) and, with `records_dir`, to
`<records_dir>/<run key>.csv.gz` as well, mode 0600 like the store (a relative `records_dir`
is taken from the campaign's scratch directory, made from the scratch area storlab holds
open, one directory at a time without following a link; an absolute one is resolved once
when the campaign is loaded, then opened from the campaign's directory when it lies
inside, else from `/`, the same way). Only a run that succeeded writes them; one that
cannot keeps its measurement and says why in a warning.

The load runs as a child process in the run's sandbox (`run_load_child`: `python -m
storlab.campaign.runners.objload`, its configuration and credentials on stdin): it writes
only its run's directory and the records directory (`records_place`), and reaches the
host's network by TCP to its endpoint's port only (Landlock) unless the campaign declares
`sandbox.network`. What it may reach and write is also held here, as early errors,
before any run (the campaign's preflight asks `refused_grant` and `refused_new_file`) and
again by each run:
- the endpoint (`endpoint`, `auth_url`) is a cluster storlab started (`cluster:`), or the
  campaign declares `sandbox.network: true`; without it a factor may not move the load to
  another host or port (`resolve_target`); with `cluster:` neither may, whatever the
  sandbox: the keys read from the cluster's state go to its own endpoint only;
- `records_dir` lies in the scratch area (relative without `..` out of it, or absolute)
  or in a directory declared in `sandbox.writable` that the sandbox opens (inside the
  campaign's directory), unless `sandbox.allow_destructive` (`refused_records_dir`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .objload import LoadResult, LoadSpec, Target, url_address
from ..spec import CampaignError
from ...errors import LoadError, StorlabError
from ...fileio import within
from ._program import read_run_file, run_program, tail
from ._sandbox import current, opened, opens_declared
from .base import RunResult

TARGET_KEYS = {f.name for f in dataclasses.fields(Target)}

#: The target options naming where the load's requests go (host and port).
ADDRESS_KEYS = ("endpoint", "auth_url")

#: The records files' mode: the store's (private to its owner).
RECORDS_MODE = 0o600


def resolve_target(options: Mapping[str, Any], config: Mapping[str, Any] | None = None,
                   network: bool = True, *, resolve: bool = True) -> dict[str, Any]:
    """The target fields a load of the runner's `options` and a configuration's factors
    (`config`, which win) uses: a running cluster's (`cluster:`, its state read once:
    `cluster_state` also checks who listens at its endpoint) plus the explicit ones.
    CampaignError says why the load may not go there. Its child reaches the host's network
    at its endpoint's port (Landlock): without `network` (the campaign's
    `sandbox.network: true`) that endpoint is the cluster's storlab started (`cluster:`),
    and neither an option nor a factor may move it to another host or port (a root HTTP
    service on loopback got thousands of requests). With `cluster:`, the cluster's keys go
    only to its own endpoint, whatever `network` says (they are root's: a campaign's
    author asking for its own `auth_url` was sent the Swift key). Without `resolve` (the
    campaign's preflight) only the refusal is asked: the cluster's state is read only
    when an address named must be held to it, and what is returned is then partial."""
    config = config or {}
    cluster = options.get("cluster")
    out = {k: v for k, v in options.items() if k in TARGET_KEYS}
    out.update({k: v for k, v in config.items() if k in TARGET_KEYS})
    named = [] if network and cluster is None else \
        [("option", k, v) for k, v in options.items() if k in ADDRESS_KEYS] + \
        [("factor", k, v) for k, v in config.items() if k in ADDRESS_KEYS]
    hint = ("the load reaches the host's network only at its endpoint: name the cluster "
            "storlab started (cluster: swift|ceph) or declare sandbox.network: true")
    if cluster is None:
        if named:
            what, k, v = named[0]
            raise CampaignError(f"{what} {k}: {v} is not the endpoint of a cluster storlab "
                                f"started; {hint}")
        return out
    if not (named or resolve):
        return out
    try:
        own = _cluster_target(cluster, options.get("cluster_dir"), out.get("api"))
    except StorlabError as exc:
        if not named:
            raise
        what, k, v = named[0]
        raise CampaignError(f"{what} {k}: {v} cannot be checked against cluster {cluster} "
                            f"({exc}); {OWN_KEYS_HINT if network else hint}") from None
    for what, k, v in named:  # the state's keys go to the state's endpoint only
        mine = own.get(k)
        try:
            theirs = url_address(v)
        except LoadError as exc:
            raise CampaignError(f"{what} {k}: {exc}") from None
        if not mine or theirs != url_address(mine):
            raise CampaignError(f"{what} {k}: {v} is not the endpoint of cluster {cluster} "
                                f"({mine or f'none for {k}'}); "
                                f"{OWN_KEYS_HINT if network else hint}")
    return {**own, **out}


def _cluster_target(cluster: Any, cluster_dir: Any, api: Any) -> dict[str, Any]:
    """The target fields of a running cluster's state (`cluster_state`: who listens at its
    endpoint checked), for `api` (the cluster's own when None)."""
    from ...clusters import cluster_state

    st = cluster_state(str(cluster), cluster_dir)
    api = api or ("swift" if cluster == "swift" else "s3")
    if api == "swift":
        if "auth_url" not in st:
            raise CampaignError(f"cluster {cluster} has no Swift API")
        return {"api": "swift", "auth_url": st["auth_url"], "user": st["user"],
                "key": st["key"]}
    s3 = st.get("s3")
    if not s3:
        raise CampaignError(f"cluster {cluster} has no S3 endpoint (bring Ceph up with "
                            "--rgw)")
    return {"api": "s3", "endpoint": s3["endpoint"], "access_key": s3["access_key"],
            "secret_key": s3["secret_key"], "region": s3.get("region", "us-east-1")}


#: Why a campaign naming `cluster:` may not name another endpoint, whatever its sandbox.
OWN_KEYS_HINT = ("the keys read from a cluster's state go only to that cluster's endpoint: "
                 "drop the option, or give another target in full with its own keys "
                 "(without cluster:)")


def refused_records_dir(records_dir: Any, scratch: str | os.PathLike[str],
                        writable: Sequence[str], allow: bool) -> str | None:
    """Why the load's records may not be written to `records_dir` (as the options hold it:
    relative to the `scratch` area, or absolute and resolved), or None: only where a run's
    programs may write too, the scratch area or a directory declared in
    `sandbox.writable` (`writable`: real paths) that the sandbox opens (`opens_declared`:
    inside the campaign's directory), or anywhere with `allow`
    (`sandbox.allow_destructive`, as fio's files not made yet). An early error: the
    load's child writes nowhere else anyway (`records_place`)."""
    if not isinstance(records_dir, str) or not records_dir or allow:
        return None
    scratch = os.path.abspath(scratch)
    rd = os.path.normpath(os.path.join(scratch, records_dir))  # an absolute one stays itself
    # an absolute one was resolved (`prepare_options`): held to the scratch area's real path
    if within(rd, scratch) or within(rd, os.path.realpath(scratch)):
        return None
    for d in writable:
        if within(rd, d):
            if opens_declared(d, allow):
                return None
            return (f"option records_dir: {records_dir} lies in {d}, outside the "
                    "campaign's directory, which sandbox.writable opens only with "
                    "sandbox.allow_destructive: true")
    return (f"option records_dir: {records_dir} lies outside the scratch area and every "
            "directory declared in sandbox.writable, where the load's sandbox lets it "
            "write: name it relative (in the scratch area), or declare its directory in "
            "sandbox.writable")


def load_option_names() -> set[str]:
    """The load options: LoadSpec's fields and the shorthands `load_spec_from` reads."""
    from .objload import LoadSpec

    return {f.name for f in dataclasses.fields(LoadSpec)} | {
        "read_pct", "object_size", "size", "get_pct", "put_pct", "delete_pct"}


def load_spec_from(values: Mapping[str, Any]) -> Any:
    """A LoadSpec from runner options and factors (shorthands resolved)."""
    from .objload import LoadSpec

    names = {f.name for f in dataclasses.fields(LoadSpec)}
    v = dict(values)
    if "read_pct" in v:
        r = float(v.pop("read_pct"))
        if not 0 <= r <= 100:
            raise CampaignError(f"read_pct {r} must be between 0 and 100")
        v["mix"] = {"get": r, "put": 100 - r}
    for alias in ("object_size", "size"):
        if alias in v:
            v["sizes"] = v.pop(alias)
    for op in ("get", "put", "delete"):
        if f"{op}_pct" in v:
            v.setdefault("mix", {})
            v["mix"] = {**(v["mix"] if isinstance(v["mix"], dict) else {}),
                        op: float(v.pop(f"{op}_pct"))}
    unknown = sorted(k for k in v if k not in names)
    if unknown:
        raise CampaignError(f"objectstore: unknown option(s) {unknown}; load options are "
                            f"{sorted(names)} plus read_pct, object_size")
    for k in ("clients", "objects", "seed", "requests"):
        if v.get(k) is not None:
            v[k] = int(float(v[k]))
    for k in ("duration", "rate", "warmup", "timeout"):
        if v.get(k) is not None:
            v[k] = float(v[k])
    return LoadSpec(**v)


class ObjectStoreRunner:
    """Runs the object-store load generator against a loopback S3 or Swift endpoint."""

    name = "objectstore"

    def starts_programs_reason(self) -> str | None:
        """None: the load's child (Python) executes nothing but its own files."""
        return None

    @staticmethod
    def prepare_options(options: dict[str, Any], directory: Path
                        ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The options as every run uses them: an absolute `records_dir` is resolved here,
        once, before the first run (links on the way the user wrote, such as `/home ->
        var/home`, are the user's own declaration); each write then opens the resolved path
        one directory at a time without following a link, so a link swapped in later is
        refused. One naming something other than a directory is refused here, in one line."""
        opts = dict(options)
        rd = opts.get("records_dir")
        if isinstance(rd, str) and rd and os.path.isabs(rd):
            real = os.path.realpath(rd)
            if os.path.lexists(real) and not os.path.isdir(real):
                raise CampaignError(f"option records_dir: {rd} is not a directory")
            opts["records_dir"] = real
        return opts, {}

    def __init__(self, records_dir: str | None = None, **options: Any) -> None:
        self.records_dir = Path(records_dir) if records_dir else None
        self.options = dict(options)
        self._target_opts = {k: self.options.pop(k) for k in list(self.options)
                             if k in TARGET_KEYS or k in ("cluster", "cluster_dir")}
        unknown = sorted(k for k in self.options if k not in load_option_names())
        if unknown:
            raise CampaignError(f"objectstore runner: unknown option(s) {unknown}; options "
                                f"are {', '.join(sorted(load_option_names() | TARGET_KEYS))}"
                                ", cluster, cluster_dir, records_dir")

    # The campaign's preflight asks these of every runner that has them (fio's names): the
    # endpoint is a grant (the network), the records a file made outside the run's
    # directory. Both are held again by each run (`run`, `write_records`).
    def job_options(self, config: Mapping[str, Any], workdir: Path, check: bool = False
                    ) -> dict[str, Any]:
        """The options a run of `config` uses, for the preflight: the target's as the
        runner holds them, and `config`, the factors, under `factors`."""
        return {"target": dict(self._target_opts), "factors": dict(config)}

    def refused_grant(self, opts: Mapping[str, Any], sockets: bool, io_uring: bool,
                      network: bool) -> str | None:
        """Why this run's endpoint is not declared (`resolve_target`'s refusal), or None."""
        try:
            resolve_target(opts["target"], opts["factors"], network, resolve=False)
        except CampaignError as exc:
            return str(exc)
        return None

    def refused_new_file(self, config: Mapping[str, Any], workdir: Path,
                         writable: Sequence[str]) -> str | None:
        """Why the records file may not be made in `records_dir` (`refused_records_dir`;
        the preflight asks only without `sandbox.allow_destructive`), or None."""
        return refused_records_dir(str(self.records_dir) if self.records_dir else None,
                                   Path(workdir).parent, writable, False)

    def network_reason(self) -> str:
        """Why the load's child gets the host's network (TCP to its endpoint's port only,
        unless the campaign declares `sandbox.network`)."""
        return "the object-store load talks to its endpoint"

    def run(self, config: Mapping[str, Any], workdir: Path, timeout: float | None = None
            ) -> RunResult:
        from .objload import failed_load, summarize
        from ...errors import StorlabError

        started = time.time()

        def failed(why: str, status: str = "failed", code: int | None = None) -> RunResult:
            return RunResult(status, stderr=why, exit_code=code, started=started,
                             ended=time.time())
        try:
            values = {**self.options, **{k: v for k, v in config.items()
                                         if k not in TARGET_KEYS}}
            spec = load_spec_from(values)
            # refused by the preflight already; a caller without one meets it here, and
            # the cluster's listener is checked again (it may have changed since)
            target = Target(**resolve_target(self._target_opts, config, current().network))
            if timeout is not None and spec.duration is not None and \
                    spec.duration + 5 > timeout:
                raise CampaignError(f"duration {spec.duration} s does not fit the run "
                                    f"timeout {timeout} s")
        except (LoadError, StorlabError) as exc:
            return failed(str(exc))
        note, bound, records = "", [], None
        if self.records_dir is not None:
            try:
                bound, records = records_place(self.records_dir, Path(workdir))
            except StorlabError as exc:  # the measurement stands; its records are in the store
                note = f"warning: records not written to records_dir: {exc}"
        try:
            out = run_load_child(target, spec, records, bound, workdir, timeout)
        finally:
            for fd, _ in bound:
                os.close(fd)
        if out.timed_out or out.exit_code != 0:
            return failed(tail(out.stderr), "timeout" if out.timed_out else "failed",
                          out.exit_code)
        try:
            raw, said = child_output(out, workdir)
        except LoadError as exc:
            return failed(str(exc))
        res = read_records(raw)
        m = {k: float(v) for k, v in summarize(res, spec.warmup, spec.rate).items()}
        m["prepare_s"] = float(said.get("prepare_s", 0.0))
        rows = [{"op": op, **{k[len(op) + 1:]: v for k, v in m.items()
                              if k.startswith(op + "_")}} for op in ("get", "put", "delete")
                if m.get(f"{op}_ops_per_s", 0) > 0]
        status = "ok"
        stderr = ""
        if failed_load(m["requests"], m["errors"]):
            status = "failed"
            bad = res[res["status"] >= 300]["status"].value_counts()
            stderr = (f"{int(m['errors'])} of {int(m['requests'])} requests failed "
                      f"({int(m.get('conn_errors', 0))} connection errors, "
                      f"{int(m.get('timeouts', 0))} timeouts, HTTP status counts "
                      f"{bad.to_dict()})")
        elif note or said.get("records_error"):  # a failed run's records stay in the store
            stderr = note or f"warning: records not written to records_dir: " \
                             f"{said['records_error']}"
        return RunResult(status, metrics=m, raw=raw, stderr=stderr, exit_code=0,
                         started=started, ended=time.time(), rows=rows)


def child_output(out: Any, workdir: Path | str) -> tuple[str, dict[str, Any]]:
    """(the records CSV, the summary line) a load's child that ended well (`out`, its
    `ProcOutcome`) left in its run directory `workdir` and on stdout; LoadError, with the
    child's stderr, when either is missing."""
    from .objload import CHILD_RECORDS

    try:
        raw = read_run_file(Path(workdir) / CHILD_RECORDS).decode()
        said = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError) as exc:
        raise LoadError(f"the object-store load's child left no records or summary ({exc})"
                        f"\n{tail(out.stderr)}") from None
    return raw, said


#: Seconds `cluster load`'s child may take beyond its duration and one request's timeout
#: (connecting, logging in, preparing the objects GETs read), before it is stopped.
LOAD_SETUP_ALLOWANCE = 600.0


def run_load_walled(target: Target, spec: LoadSpec) -> LoadResult:
    """`objload.run_load` (an `objload.LoadResult`) run as a campaign's run runs it, for
    `storlab cluster load`: the same child (`run_load_child`) in the same walls (TCP to
    the target's ports only; writable only its run directory, a new private directory
    storlab made and holds open), credentials on stdin. The records are read back from
    the directory storlab holds, without following a link. LoadError with the child's own
    line when the load cannot run."""
    from .objload import summarize
    from ...fileio import temporary_directory
    from ._program import run_directory
    from ._sandbox import Declared, declared

    with temporary_directory("storlab-load-") as tmp:
        fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            with declared(Declared().holding(tmp, fd)), run_directory(tmp, fd):
                # bounded like a run: the load, one request's timeout, and room for
                # preparing its objects (each request ends at its timeout); a load of
                # a request count (the Dask hosts' preparing one): every request its
                # timeout, one client after another at worst
                span = (spec.duration if spec.duration is not None else
                        spec.timeout * -(-int(spec.requests or 1) // int(spec.clients)))
                limit = span + spec.timeout + LOAD_SETUP_ALLOWANCE
                out = run_load_child(target, spec, None, (), tmp, limit)
                if out.timed_out:
                    raise LoadError(f"the load did not end within {limit:g} s (its "
                                    f"{span:g} s, one request's {spec.timeout:g} s "
                                    "timeout and time to prepare its objects); stopped")
                if out.exit_code != 0:
                    said = [ln for ln in out.stderr.splitlines() if ln.strip()]
                    own = [ln for ln in said if ln.startswith("objectstore load: ")]
                    why = (own[-1][len("objectstore load: "):] if own else
                           tail("\n".join(said)) or
                           f"the load's child exited with {out.exit_code}")
                    if "connection error" in why:  # maybe a port the walls keep shut
                        why += (" (the load's sandbox reaches TCP only at port "
                                f"{', '.join(map(str, endpoint_ports(target)))}, the "
                                "cluster's endpoint)")
                    raise LoadError(why)
                raw, said_json = child_output(out, tmp)
        finally:
            os.close(fd)
    records = read_records(raw)
    return LoadResult(records, summarize(records, spec.warmup, spec.rate),
                      float(said_json.get("prepare_s", 0.0)), bool(said_json.get("prepared")))


def read_records(csv: str) -> Any:
    """The records table from the CSV a load's child wrote (`objload.rows_to_csv`)."""
    import io

    import pandas as pd

    times = {c: float for c in ("t_sched", "t_start", "t_end")}
    return pd.read_csv(io.StringIO(csv), keep_default_na=False,
                       na_values={c: [""] for c in times},
                       dtype={**times, "op": str, "size": "int64", "status": "int64",
                              "worker": "int64"})


def _package_root() -> str:
    """The directory storlab is imported from (shown read-only to the load's child)."""
    here = os.path.abspath(__file__)  # <root>/storlab/campaign/runners/objectstore.py
    for _ in range(4):
        here = os.path.dirname(here)
    return here


def endpoint_ports(target: Target) -> list[int]:
    """The TCP ports the load's child may reach (Landlock): its endpoint's and auth URL's."""
    return sorted({url_address(u)[2] for u in (target.endpoint, target.auth_url) if u})


def run_load_child(target: Target, spec: Any, records: dict[str, str] | None,
                   bound: Sequence[tuple[int, str]], workdir: Path | str,
                   timeout: float | None) -> Any:
    """Run the load as a child process in the run's sandbox (`objload.main`), its
    configuration and credentials on stdin (never in argv, its environment or a file):
    it sees storlab's package read-only, writes the run's directory and the directories
    `bound` (`records_place`), and reaches the host's network by TCP to the target's
    ports only (Landlock), unless the campaign declares `sandbox.network`. Returns the
    child's `ProcOutcome`."""
    from .objload import child_config

    root = _package_root()
    ports = endpoint_ports(target)
    env = {"PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get(
        "PYTHONPATH")])]), "PYTHONDONTWRITEBYTECODE": "1"}
    with opened(network=True, readable=[root], ports=ports, bound=bound):
        # -P: not the run's directory first on the path (a step could put a module there)
        return run_program([sys.executable, "-P", "-m", f"{__package__}.objload"],
                           cwd=os.fspath(workdir), timeout=timeout, env=env,
                           stdin_text=child_config(target, spec, records),
                           executables=[sys.executable])


def records_place(records_dir: Path, workdir: Path) -> tuple[list[tuple[int, str]],
                                                            dict[str, str]]:
    """Where a run's load child writes `<records_dir>/<run key>.csv.gz`: (directories to
    bind writable for it, each (descriptor, where it shows): the caller closes them; the
    child's `records` of `objload.child_config`). Only where the campaign lets its runs
    write (`refused_records_dir`, asked of the run's declarations): StorlabError otherwise.
    In the scratch area (relative, or absolute inside it), and anywhere with
    `sandbox.allow_destructive`, storlab makes the directory and opens it from the
    scratch area it holds for the run (`held_scratch`; from `/` elsewhere), one directory
    at a time without following a link, and binds that descriptor. In a directory declared
    in `sandbox.writable` the child makes and writes it itself, inside the walls that
    directory's mount opens: whatever the checks said, the child writes nowhere else."""
    from ...fileio import open_dir_beneath
    from ._program import held_scratch

    scratch = os.path.dirname(os.path.abspath(workdir))
    decl = current()
    why = refused_records_dir(str(records_dir), scratch,
                              [os.path.realpath(p) for p in decl.paths],
                              decl.allow_destructive)
    if why:
        raise StorlabError(why)
    name = f"{Path(workdir).name}.csv.gz"
    rd = os.path.normpath(os.path.join(scratch, records_dir))  # an absolute one stays itself
    real = os.path.realpath(scratch)
    inside = within(rd, scratch) or within(rd, real)
    if inside or decl.allow_destructive:
        held = held_scratch()
        if inside:
            top = scratch if within(rd, scratch) else real
            home_fd = held[1] if held is not None and held[0] == scratch else None
        else:
            top, home_fd = "/", None
        fd = open_dir_beneath(top, rd, what="records_dir", home_fd=home_fd)
        at = os.readlink(f"/proc/self/fd/{fd}")  # where the kernel has it: shown there
        return [(fd, at)], {"dir": at, "name": name, "home": at}
    home = next((os.path.realpath(h) for h in decl.homes
                 if within(rd, os.path.realpath(h), strict=True)), "/")
    return [], {"dir": rd, "name": name, "home": home}
