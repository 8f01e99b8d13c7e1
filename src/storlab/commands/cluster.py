"""`storlab cluster up|status|down`: throwaway single-host Ceph and Swift clusters, and
`storlab cluster load`: the object-store load generator against one of them."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import StorlabError
from ..fileio import write_frame
from ._common import at_least, console, emit_json, input_dir, output_file, positive

cluster_app = typer.Typer(
    name="cluster", no_args_is_help=True, add_completion=False,
    help="Bring a throwaway single-host Ceph or Swift cluster up and down (as root).")

DIR_OPT = typer.Option(None, "--dir", help="Where clusters live (default "
                       "$STORLAB_CLUSTER_DIR, else /var/lib/storlab/clusters as root, "
                       "$XDG_STATE_HOME/storlab/clusters otherwise); refused when a user "
                       "other than root or you owns or may write a directory on its path "
                       "(a sticky directory such as /tmp is allowed above it).",
                       callback=input_dir("--dir"))
JSON_OPT = typer.Option(False, "--json/--no-json", help="Print JSON.")
OUT_OPT = typer.Option(None, "-o", "--output", help="Write the JSON to a file.",
                       callback=output_file("-o"))


def _kinds(kind: Optional[str]) -> tuple[str, ...]:
    from ..campaign.runners import register_cluster_walls
    from ..clusters import KINDS, ClusterError

    register_cluster_walls()  # the walls the clusters' programs start in
    if kind is None:
        return KINDS
    if kind not in KINDS:
        raise ClusterError(f"cluster kind {kind!r} must be one of {', '.join(KINDS)}")
    return (kind,)


def up_cmd(
    kind: str = typer.Argument(..., help="ceph or swift."),
    osds: int = typer.Option(1, "--osds", help="Ceph: number of OSDs (1-8).",
                             callback=at_least("--osds", 1, 8)),
    replicas: Optional[int] = typer.Option(None, "--replicas",
                                           help="Replicas (Ceph: min(osds,3); Swift: 3).",
                                           callback=at_least("--replicas", 1)),
    store: str = typer.Option("memstore", "--store", help="Ceph: memstore or bluestore."),
    osd_size: str = typer.Option("1G", "--osd-size",
                                 help="Ceph: memstore cap / bluestore file size per OSD."),
    rgw: bool = typer.Option(False, "--rgw/--no-rgw", help="Ceph: start radosgw (S3) too."),
    workers: int = typer.Option(1, "--workers", help="Swift: workers per storage server.",
                                callback=at_least("--workers", 1)),
    proxy_workers: int = typer.Option(2, "--proxy-workers", help="Swift: proxy workers.",
                                      callback=at_least("--proxy-workers", 1)),
    storage: str = typer.Option("loop", "--storage",
                                help="Swift: loop (XFS image) or dir (plain directories)."),
    timeout: float = typer.Option(120, "--timeout", help="Seconds to wait for health.",
                                  callback=positive("--timeout")),
    bind: str = typer.Option("127.0.0.1", "--bind",
                             help="Address the daemons listen on: loopback, or a private "
                             "address of this host that load hosts reach (e.g. the root end "
                             "of a network-namespace LAN)."),
    base: Optional[Path] = DIR_OPT,
    json_out: bool = JSON_OPT,
    output: Optional[Path] = OUT_OPT,
) -> None:
    """Bring a cluster up and wait until it serves requests."""
    from ..clusters import ClusterError, get_cluster
    from ..units import parse_size

    (k,) = _kinds(kind)
    c = get_cluster(k, base)
    if k == "ceph":
        from ..clusters import CephOptions

        try:
            size = parse_size(osd_size, "object size")
        except StorlabError as exc:
            raise ClusterError(f"--osd-size: {exc}") from None
        st = c.up(CephOptions(osds=osds, replicas=replicas, store=store, osd_bytes=size,
                              rgw=rgw, bind=bind), timeout=timeout)
    else:
        from ..clusters import SwiftOptions

        st = c.up(SwiftOptions(replicas=replicas or 3, workers=workers,
                               proxy_workers=proxy_workers, storage=storage, bind=bind),
                 timeout=timeout)
    if json_out or output:
        emit_json(st, output, private=True)  # the state holds the cluster's keys
        if not json_out:
            return
        return
    console.print(f"{k} cluster up in {st['up_seconds']} s at {st['dir']}")
    _print_endpoints(st)


def _print_endpoints(st: dict) -> None:
    if st["kind"] == "ceph":
        # (`load_state` holds conf, pool, image; a state an older storlab wrote may lack
        # the rest)
        console.print(f"  conf {st['conf']}  pool {st['pool']}  rbd image "
                      f"{st['pool']}/{st['image']}  ({st.get('osds', '?')} x "
                      f"{st.get('store', '?')}, size {st.get('replicas', '?')})")
    else:
        console.print(f"  swift auth {st['auth_url']} user {st['user']} key {st['key']}  "
                      f"({st.get('replicas', '?')} replicas, {st.get('workers', '?')} "
                      f"worker(s)/server, {st.get('proxy_workers', '?')} proxy workers)")
    if st.get("s3"):
        s3 = st["s3"]
        console.print(f"  s3 {s3['endpoint']} access {s3['access_key']} secret "
                      f"{s3['secret_key']}")


def status_cmd(
    kind: Optional[str] = typer.Argument(None, help="ceph or swift (default both)."),
    probe: bool = typer.Option(False, "--probe/--no-probe", help="Also write a 4 KiB object and read "
                               "it back (bounded by 10 s per request)."),
    base: Optional[Path] = DIR_OPT,
    json_out: bool = JSON_OPT,
    output: Optional[Path] = OUT_OPT,
) -> None:
    """Show the clusters that are up, every daemon storlab started, and their health
    (healthy only if every daemon runs and the cluster's own checks agree). Exit code 1
    when a cluster is up but not healthy."""
    from ..clusters import get_cluster

    out = {k: get_cluster(k, base).status(probe=probe) for k in _kinds(kind)}
    if json_out or output:
        emit_json(out, output, private=True)  # the states hold the clusters' keys
    else:
        for k, st in out.items():
            if st is None:
                console.print(f"{k}: down")
                continue
            alive = sum(st["daemons"].values())
            console.print(f"{k}: {'up' if st.get('ready') else 'starting/broken'}, "
                          f"{alive}/{len(st['daemons'])} daemons running, "
                          f"{'healthy' if st['healthy'] else 'NOT healthy'}: "
                          f"{st['health']}", markup=False)
            if st.get("probe"):
                console.print(f"  probe: {st['probe']}", markup=False)
            _print_endpoints(st)
    if any(st is not None and not st["healthy"] for st in out.values()):
        raise typer.Exit(1)


def down_cmd(
    kind: Optional[str] = typer.Argument(None, help="ceph or swift (default both)."),
    base: Optional[Path] = DIR_OPT,
    json_out: bool = JSON_OPT,
    output: Optional[Path] = OUT_OPT,
) -> None:
    """Stop every daemon by PID, unmount, detach loop devices, remove the files."""
    from ..clusters import get_cluster

    out = {k: get_cluster(k, base).down() for k in _kinds(kind)}
    if json_out or output:
        emit_json(out, output)
        return
    for k, r in out.items():
        if r["removed"] is None and not r["stopped"]:
            console.print(f"{k}: nothing to bring down")
        else:
            console.print(f"{k}: stopped {', '.join(r['stopped']) or 'nothing'}; removed "
                          f"{r['removed']}")


def client_conf_cmd(
    dest: Path = typer.Argument(..., help="Directory for ceph.conf and the keyring copy "
                                "(refused when another user owns or may write a directory "
                                "on its path; files written without following links)."),
    base: Optional[Path] = DIR_OPT,
    json_out: bool = JSON_OPT,
) -> None:
    """Write a Ceph client's ceph.conf and admin keyring (mode 600, directory 700) for load
    hosts, e.g. fio servers in network namespaces: start them with CEPH_CONF=DEST/ceph.conf."""
    from ..campaign.runners import register_cluster_walls
    from ..clusters import get_cluster

    register_cluster_walls()
    got = get_cluster("ceph", base).client_conf(dest)
    if json_out:
        emit_json(got, None)
        return
    console.print(f"wrote {got['conf']} and {got['keyring']} (mode 600); start load hosts "
                  f"with CEPH_CONF={got['conf']}", markup=False)


def load_cmd(
    kind: str = typer.Argument(..., help="ceph (S3 via radosgw) or swift."),
    api: Optional[str] = typer.Option(None, "--api", help="s3 or swift (default: swift on "
                                      "Swift, s3 on Ceph)."),
    mix: str = typer.Option("get:100", "--mix", help="Operation weights, e.g. get:70,put:30."),
    sizes: str = typer.Option("16k", "--sizes", help="Object size or 16k:0.8,1m:0.2."),
    clients: int = typer.Option(8, "--clients", help="Concurrent clients.",
                                callback=at_least("--clients", 1)),
    rate: Optional[float] = typer.Option(None, "--rate",
                                         help="Open loop at this many requests/s.",
                                         callback=positive("--rate")),
    duration: float = typer.Option(10, "--duration", help="Seconds of load.",
                                   callback=positive("--duration")),
    objects: int = typer.Option(200, "--objects", help="Objects prepared for GETs.",
                                callback=at_least("--objects", 1)),
    timeout: float = typer.Option(10, "--timeout", help="Seconds a request may take before "
                                  "it counts as timed out (no retry).",
                                  callback=positive("--timeout")),
    records: Optional[Path] = typer.Option(None, "--records",
                                           help="Write per-request records (CSV).",
                                           callback=output_file("--records")),
    dask: Optional[str] = typer.Option(None, "--dask", help="[tls://]HOST:PORT of a Dask scheduler "
                                       "(TLS from Dask's configuration) whose workers (one per load host) run the load; "
                                       "merged per host. --clients and --rate are per host."),
    hosts: int = typer.Option(1, "--hosts", help="With --dask: load hosts to use (one worker "
                              "on each).", callback=at_least("--hosts", 1)),
    base: Optional[Path] = DIR_OPT,
    json_out: bool = JSON_OPT,
    output: Optional[Path] = OUT_OPT,
) -> None:
    """Run the object-store load generator against a running cluster: as a child process in
    the sandbox a campaign's object-store run gets (TCP to the cluster's port only, writable
    only a private directory storlab made; storlab writes --records). With --dask the load
    runs on the Dask workers: a root worker starts the same walled child, a worker of
    another account runs it as that account."""
    import pandas as pd

    from ..campaign.runners import Target, load_spec_from, resolve_target, run_load_walled
    from ._common import frame_table

    (k,) = _kinds(kind)
    if hosts != 1 and dask is None:
        raise StorlabError("--hosts needs --dask HOST:PORT (the scheduler of the load hosts)")
    opts: dict = {"cluster": k, "cluster_dir": base}
    if api:
        opts["api"] = api
    spec = load_spec_from({"mix": mix, "sizes": sizes, "clients": clients, "rate": rate,
                           "mode": "open" if rate else "closed", "duration": duration,
                           "objects": objects, "timeout": timeout})
    target = Target(**resolve_target(opts))
    host_rows: list[dict] = []
    if dask is not None:
        from ..campaign.runners import run_load_on_hosts

        # a root worker runs its host's load as the walled child below does
        multi = run_load_on_hosts(dask, target, spec, hosts, walled=run_load_walled)
        s, host_rows, recs = multi.summary, multi.rows, multi.records
    else:  # a child in the walls a campaign's object-store run gets (the load is root's)
        res = run_load_walled(target, spec)
        s, recs = res.summary, res.records
    if records:
        write_frame(recs, records, what="--records", fmt="csv")
    if json_out or output:
        emit_json({"merged": s, "hosts": host_rows} if dask is not None else s, output)
        return
    if host_rows:
        console.print(frame_table(pd.DataFrame(
            [{"host": r["host"], "ops/s": r["ops_per_s"], "MB/s": r["mb_per_s"],
              "mean ms": r["lat_mean_ms"], "p99 ms": r["lat_p99_ms"],
              "errors": r["errors"]} for r in host_rows]),
            title=f"{k}: per host ({len(host_rows)})"))
    if s.get("conn_errors") or s.get("timeouts"):
        console.print(f"{k}: {int(s['conn_errors'])} connection error(s) and "
                      f"{int(s['timeouts'])} timeout(s) (> {timeout:g} s) among "
                      f"{int(s['requests'])} requests", markup=False)
    rows = [{"op": op, "ops/s": s[f"{op}_ops_per_s"], "MB/s": s[f"{op}_mb_per_s"],
             "mean ms": s[f"{op}_lat_mean_ms"], "p50 ms": s[f"{op}_lat_p50_ms"],
             "p95 ms": s[f"{op}_lat_p95_ms"], "p99 ms": s[f"{op}_lat_p99_ms"],
             "errors": s[f"{op}_errors"]} for op in ("get", "put", "delete")
            if s[f"{op}_ops_per_s"] > 0 or s[f"{op}_errors"] > 0]
    merged = f"{len(host_rows)} hosts, " if host_rows else ""
    console.print(frame_table(pd.DataFrame(rows), title=f"{k}: {merged}{s['ops_per_s']:.1f} "
                              "ops/s, "
                              f"{s['mb_per_s']:.2f} MB/s over {s['duration_s']:.1f} s"))


def register(app: typer.Typer) -> None:
    cluster_app.command("up")(up_cmd)
    cluster_app.command("status")(status_cmd)
    cluster_app.command("down")(down_cmd)
    cluster_app.command("load")(load_cmd)
    cluster_app.command("client-conf")(client_conf_cmd)
    app.add_typer(cluster_app, name="cluster")
