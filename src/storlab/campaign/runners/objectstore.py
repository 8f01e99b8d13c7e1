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
is taken from the campaign's scratch directory, and written from the scratch area storlab
holds open, one directory at a time without following a link; an absolute one is resolved
once when the campaign is loaded, then opened from the campaign's directory when it lies
inside, else from `/`, the same way). Only a run that succeeded writes them; one that
cannot keeps its measurement and says why in a warning.

The load runs in storlab's own process, outside the sandbox the other runners' programs
get, so what it reaches and writes is held here, before any run (the campaign's preflight
asks `refused_grant` and `refused_new_file`) and again by each run:
- the endpoint (`endpoint`, `auth_url`) is a cluster storlab started (`cluster:`), or the
  campaign declares `sandbox.network: true`; without it a factor may not move the load to
  another host or port (`refused_endpoint`);
- `records_dir` lies in the scratch area (relative without `..` out of it, or absolute)
  or in a directory declared in `sandbox.writable` that the sandbox opens (not a system
  or shared one), unless `sandbox.allow_destructive` (`refused_records_dir`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .objload import Target, url_address
from ..spec import CampaignError
from ...errors import LoadError
from ...fileio import within
from ._sandbox import current, opens_declared
from .base import RunResult

TARGET_KEYS = {f.name for f in dataclasses.fields(Target)}

#: The target options naming where the load's requests go (host and port).
ADDRESS_KEYS = ("endpoint", "auth_url")

#: The records files' mode: the store's (private to its owner).
RECORDS_MODE = 0o600


def resolve_target(options: Mapping[str, Any]) -> dict[str, Any]:
    """Target fields from a running cluster's state (`cluster:`) plus explicit options."""
    opts = dict(options)
    out: dict[str, Any] = {}
    cluster = opts.pop("cluster", None)
    if cluster is not None:
        from ...clusters import cluster_state

        st = cluster_state(str(cluster), opts.pop("cluster_dir", None))
        api = opts.get("api") or ("swift" if cluster == "swift" else "s3")
        if api == "swift":
            if "auth_url" not in st:
                raise CampaignError(f"cluster {cluster} has no Swift API")
            out.update(api="swift", auth_url=st["auth_url"], user=st["user"], key=st["key"])
        else:
            s3 = st.get("s3")
            if not s3:
                raise CampaignError(f"cluster {cluster} has no S3 endpoint (bring Ceph up "
                                    "with --rgw)")
            out.update(api="s3", endpoint=s3["endpoint"], access_key=s3["access_key"],
                       secret_key=s3["secret_key"], region=s3.get("region", "us-east-1"))
    out.update({k: v for k, v in opts.items() if k in TARGET_KEYS})
    return out


def refused_endpoint(options: Mapping[str, Any], config: Mapping[str, Any],
                     network: bool) -> str | None:
    """Why the load may not go where the runner's `options` and a configuration's factors
    (`config`) send it, or None. The load runs in storlab's process (often root), outside
    the sandbox: without the campaign's `sandbox.network: true` its endpoint is that of the
    cluster storlab started (`cluster:`), and neither an option nor a factor may move it to
    another host or port (a root HTTP service on loopback got thousands of requests)."""
    if network:
        return None
    named = [("option", k, v) for k, v in options.items() if k in ADDRESS_KEYS] + \
        [("factor", k, v) for k, v in config.items() if k in ADDRESS_KEYS]
    if not named:
        return None  # the cluster's endpoint, or none (the run then fails on it)
    hint = ("the load runs in storlab's own process, outside the sandbox: name the cluster "
            "storlab started (cluster: swift|ceph) or declare sandbox.network: true")
    cluster = options.get("cluster")
    if cluster is None:
        what, k, v = named[0]
        return f"{what} {k}: {v} is not the endpoint of a cluster storlab started; {hint}"
    from ...errors import StorlabError

    api = config.get("api", options.get("api"))
    try:
        own = resolve_target({"cluster": cluster, "cluster_dir": options.get("cluster_dir"),
                              **({"api": api} if api else {})})
    except StorlabError as exc:
        what, k, v = named[0]
        return f"{what} {k}: {v} cannot be checked against cluster {cluster} ({exc}); {hint}"
    for what, k, v in named:
        mine = own.get(k)
        try:
            theirs = url_address(v)
        except LoadError as exc:
            return f"{what} {k}: {exc}"
        if not mine or theirs != url_address(mine):
            return (f"{what} {k}: {v} is not the endpoint of cluster {cluster} "
                    f"({mine or f'none for {k}'}); {hint}")
    return None


def refused_records_dir(records_dir: Any, scratch: str | os.PathLike[str],
                        writable: Sequence[str], allow: bool) -> str | None:
    """Why the load's records may not be written to `records_dir` (as the options hold it:
    relative to the `scratch` area, or absolute and resolved), or None. storlab writes them
    itself, outside the sandbox: only where a run's programs may write too, the scratch
    area or a directory declared in `sandbox.writable` (`writable`: real paths) that the
    sandbox opens (`opens_declared`: no system or shared directory), or anywhere with
    `allow` (`sandbox.allow_destructive`, as fio's files not made yet)."""
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
            return (f"option records_dir: {records_dir} lies in {d}, a system or shared "
                    "directory, which sandbox.writable opens only with "
                    "sandbox.allow_destructive: true")
    return (f"option records_dir: {records_dir} lies outside the scratch area and every "
            "directory declared in sandbox.writable; storlab writes the records there "
            "itself, outside the sandbox: name it relative (in the scratch area), or "
            "declare its directory in sandbox.writable")


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
        """Why this run's endpoint is not declared (`refused_endpoint`), or None."""
        return refused_endpoint(opts["target"], opts["factors"], network)

    def refused_new_file(self, config: Mapping[str, Any], workdir: Path,
                         writable: Sequence[str]) -> str | None:
        """Why the records file may not be made in `records_dir` (`refused_records_dir`;
        the preflight asks only without `sandbox.allow_destructive`), or None."""
        return refused_records_dir(str(self.records_dir) if self.records_dir else None,
                                   Path(workdir).parent, writable, False)

    def run(self, config: Mapping[str, Any], workdir: Path, timeout: float | None = None
            ) -> RunResult:
        from .objload import LoadError, records_to_csv, run_load
        from ...errors import StorlabError

        started = time.time()
        try:
            values = {**self.options, **{k: v for k, v in config.items()
                                         if k not in TARGET_KEYS}}
            spec = load_spec_from(values)
            why = refused_endpoint(self._target_opts, config, current().network)
            if why:  # the preflight refused it already; a caller without one meets it here
                raise CampaignError(why)
            target = Target(**resolve_target({**self._target_opts,
                                              **{k: v for k, v in config.items()
                                                 if k in TARGET_KEYS}}))
            if timeout is not None and spec.duration is not None and \
                    spec.duration + 5 > timeout:
                raise CampaignError(f"duration {spec.duration} s does not fit the run "
                                    f"timeout {timeout} s")
            res = run_load(target, spec)
        except (LoadError, StorlabError) as exc:
            return RunResult("failed", stderr=str(exc), started=started, ended=time.time())
        csv = records_to_csv(res.records)
        m = {k: float(v) for k, v in res.summary.items()}
        m["prepare_s"] = res.prepare_seconds
        rows = [{"op": op, **{k[len(op) + 1:]: v for k, v in m.items()
                              if k.startswith(op + "_")}} for op in ("get", "put", "delete")
                if m.get(f"{op}_ops_per_s", 0) > 0]
        status = "ok"
        stderr = ""
        if m["requests"] == 0 or (m["errors"] > 0.5 * m["requests"]):
            status = "failed"
            bad = res.records[res.records["status"] >= 300]["status"].value_counts()
            stderr = (f"{int(m['errors'])} of {int(m['requests'])} requests failed "
                      f"({int(m.get('conn_errors', 0))} connection errors, "
                      f"{int(m.get('timeouts', 0))} timeouts, HTTP status counts "
                      f"{bad.to_dict()})")
        elif self.records_dir is not None:  # a failed run's records stay in the store only
            import gzip

            try:
                write_records(self.records_dir, Path(workdir), gzip.compress(csv.encode()))
            except StorlabError as exc:  # the measurement stands; its records are in the store
                stderr = f"warning: records not written to records_dir: {exc}"
        return RunResult(status, metrics=m, raw=csv, stderr=stderr, exit_code=0,
                         started=started, ended=time.time(), rows=rows)


def write_records(records_dir: Path, workdir: Path, data: bytes) -> Path:
    """Write a run's records to `<records_dir>/<run key>.csv.gz`. A relative `records_dir`
    lies in the campaign's scratch directory (the parent of every run's own) and is made
    and opened from the scratch area storlab holds open for the run (`held_scratch`), one
    directory at a time without following a link: a link a run's program or a step
    planted for it, or for a directory below it, is refused, never followed. An absolute
    one inside the campaign's directory is opened from that directory the same way, one
    elsewhere from `/` (a link anywhere on its way, say one planted in /tmp, is refused:
    storlab, often root, would write where the link leads). Only where the campaign lets
    its runs write (`refused_records_dir`, asked of the run's declarations again here);
    the file is private, as the store."""
    from ...errors import StorlabError
    from ...fileio import write_in_dir
    from ._program import held_scratch

    scratch = os.path.dirname(os.path.abspath(workdir))
    decl = current()
    why = refused_records_dir(str(records_dir), scratch,
                              [os.path.realpath(p) for p in decl.paths],
                              decl.allow_destructive)
    if why:
        raise StorlabError(why)
    if records_dir.is_absolute():
        rdir, home_fd = records_dir, None
        home = next((os.path.realpath(h) for h in decl.homes
                     if within(os.path.abspath(rdir), os.path.realpath(h), strict=True)), "/")
    else:
        held = held_scratch()
        rdir, home = Path(scratch) / records_dir, scratch
        home_fd = held[1] if held is not None and held[0] == scratch else None
    return write_in_dir(rdir, f"{Path(workdir).name}.csv.gz", data, what="records_dir",
                        home=home, home_fd=home_fd, mode=RECORDS_MODE)
