"""The object-store runner's load runs as a child in the run's sandbox; where it sends
requests and where it writes its records are also held to what the campaign declares,
before any run, in one line, exit 2.
Routes found by an attacker: an `endpoint` naming a root HTTP service on loopback got
thousands of requests without `sandbox.network`; `records_dir: /etc` wrote root files into
/etc. The real runner against a real HTTP server on loopback (the Swift cluster's cases:
tests/clusters/test_swift_cluster.py)."""

from __future__ import annotations

import http.server
import os
import sqlite3
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)


class _Counting(http.server.BaseHTTPRequestHandler):
    """Answers every request 200 with an empty body, and counts it."""

    hits: list[str] = []

    def _any(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.hits.append(self.command)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _any

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    """An HTTP service on loopback (as a root daemon would be): its URL and its hits."""
    hits: list[str] = []
    handler = type("H", (_Counting,), {"hits": hits})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", hits
    finally:
        srv.shutdown()
        srv.server_close()


def campaign(d: Path, options: dict[str, Any], factors: list[dict[str, Any]] | None = None,
             **extra: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    space = {"factors": factors or [{"name": "object_size", "kind": "ordinal",
                                     "values": ["4KiB", "8KiB"]}],
             "responses": [{"name": "put_ops_per_s", "goal": "maximize"}]}
    (d / "campaign.yaml").write_text(yaml.safe_dump(
        {"name": "obj", "timeout": 60, "space": space, "design": {"kind": "full"},
         "runner": {"type": "objectstore", "options": {
             "api": "s3", "access_key": "a", "secret_key": "b", "duration": 1,
             "clients": 1, "objects": 2, **options}}, **extra}, sort_keys=False))
    return d / "campaign.yaml"


def refused(p: Any, *words: str) -> None:
    """One storlab line naming `words`, exit 2, no traceback."""
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, (p.returncode, p.stdout, p.stderr)
    assert lines[0].startswith("storlab: error:") and "Traceback" not in p.stderr
    assert all(w in lines[0] for w in words), lines[0]


def test_an_endpoint_not_declared_is_refused_before_any_request(
        tmp_path: Path, listener: tuple[str, list[str]], storlab: Any) -> None:
    url, hits = listener
    p = storlab("run", str(campaign(tmp_path / "a", {"endpoint": url})), timeout=120)
    refused(p, "option endpoint", url, "sandbox.network: true")
    # a factor naming the endpoint (no cluster to hold it to) is refused the same way
    p = storlab("run", str(campaign(tmp_path / "b", {}, factors=[
        {"name": "endpoint", "kind": "categorical", "values": [url, url + "/"]}])),
        timeout=120)
    refused(p, "factor endpoint", url)
    assert hits == []
    assert not (tmp_path / "a" / "campaign.db.output").exists()


def test_records_dir_outside_what_the_runs_may_write_is_refused(
        tmp_path: Path, listener: tuple[str, list[str]], storlab: Any) -> None:
    url, hits = listener
    net = {"network": True}
    mine = tmp_path / "mine"
    mine.mkdir()
    for name, rd, sandbox, words in [
            ("etc", "/etc", net, ("option records_dir: /etc", "sandbox.writable")),
            ("up", "../../mine", net, ("records_dir: ../../mine", "outside the scratch")),
            ("undeclared", str(mine), net, (str(mine), "declare its directory")),
            ("system", "/etc/storlab-records", {**net, "writable": ["/etc"]},
             ("sandbox.writable[0]", "/etc", "outside the campaign's directory",
              "allow_destructive"))]:
        p = storlab("run", str(campaign(tmp_path / name, {"endpoint": url, "records_dir": rd},
                                        sandbox=sandbox)), timeout=120)
        refused(p, *words)
    assert hits == [] and list(mine.iterdir()) == []
    assert not [f for f in os.listdir("/etc") if f.endswith(".csv.gz")]
    assert not os.path.exists("/etc/storlab-records")


def test_the_ceph_runners_objectstore_load_is_held_before_any_run(
        tmp_path: Path, listener: tuple[str, list[str]], storlab: Any) -> None:
    """The ceph runner with an object-store load: its endpoint and records_dir are refused
    by the preflight as the objectstore runner's are (only each run held them). No Ceph
    cluster is needed: the preflight refuses before it would ask one."""
    url, hits = listener
    clusters = tmp_path / "clusters"
    clusters.mkdir(mode=0o700)

    def ceph(name: str, load: dict[str, Any], **extra: Any) -> Path:
        d = tmp_path / name
        d.mkdir()
        space = {"factors": [{"name": "object_size", "kind": "ordinal",
                              "values": ["4KiB", "8KiB"]}],
                 "responses": [{"name": "put_ops_per_s", "goal": "maximize"}]}
        (d / "campaign.yaml").write_text(yaml.safe_dump(
            {"name": "c", "timeout": 60, "space": space, "design": {"kind": "full"},
             "runner": {"type": "ceph", "options": {
                 "cluster_dir": str(clusters),
                 "load": {"type": "objectstore", "options": {
                     "api": "s3", "duration": 1, "clients": 1, "objects": 2, **load}}}},
             **extra}, sort_keys=False))
        return d / "campaign.yaml"

    p = storlab("run", str(ceph("ep", {"endpoint": url})), timeout=120)
    refused(p, "field runner: load: option endpoint", url, "sandbox.network: true")
    p = storlab("run", str(ceph("rec", {"records_dir": "/etc"}, sandbox={"network": True})),
                timeout=120)
    refused(p, "field runner: load: option records_dir: /etc", "sandbox.writable")
    assert hits == []
    assert not [f for f in os.listdir("/etc") if f.endswith(".csv.gz")]


def test_an_absolute_records_dir_inside_the_scratch_area_is_accepted(tmp_path: Path) -> None:
    """It lies inside the scratch area: it was refused as "outside the scratch area"."""
    from storlab.campaign.runners.objectstore import refused_records_dir

    scratch = tmp_path / "scratch"
    (scratch / "rec").mkdir(parents=True)
    os.symlink(scratch, tmp_path / "via")  # the scratch area named through a link
    for rd in (str(scratch / "rec"), str(scratch)):
        assert refused_records_dir(rd, scratch, [], False) is None
        assert refused_records_dir(rd, tmp_path / "via", [], False) is None
    why = refused_records_dir(str(tmp_path / "elsewhere"), scratch, [], False)
    assert why is not None and "outside the scratch area" in why


def test_declared_endpoint_and_records_dir_run_and_their_files_are_private(
        tmp_path: Path, listener: tuple[str, list[str]], storlab: Any) -> None:
    """Declared (`sandbox.network: true`, records_dir in a `sandbox.writable` directory),
    the load runs; the records and the runs' stream files are 0600 in a 0700 output
    directory, as the store: a program's output may hold what only root could read. A
    report the user writes with `-o` keeps the umask (the user's file)."""
    url, hits = listener
    camp = campaign(tmp_path / "c", {"endpoint": url,
                                     "records_dir": str(tmp_path / "c" / "out/rec")},
                    sandbox={"network": True, "writable": ["out"]})
    (tmp_path / "c" / "out").mkdir()
    p = storlab("run", str(camp), timeout=120)
    assert p.returncode == 0 and "ok 2, failed 0" in p.stdout, p.stdout + p.stderr
    assert len(hits) > 10
    recs = sorted((tmp_path / "c" / "out" / "rec").glob("*.csv.gz"))
    assert len(recs) == 2
    assert {stat.S_IMODE(f.stat().st_mode) for f in recs} == {0o600}
    store = tmp_path / "c" / "campaign.db"
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT count(*) FROM runs WHERE status = 'ok'").fetchone()[0] == 2
    out = tmp_path / "c" / "campaign.db.output"
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    os.umask(old := os.umask(0o022))
    p = storlab("results", str(camp), "-o", str(tmp_path / "r.csv"), timeout=120)
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE((tmp_path / "r.csv").stat().st_mode) == 0o666 & ~old


def test_a_programs_stream_files_are_private_as_the_store(tmp_path: Path,
                                                          storlab: Any) -> None:
    """Route: a command printed a root-only file; its stream file was 0644 in a 0755
    directory, read by another user. Now 0600 in 0700, as the store."""
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t\n")
    secret.chmod(0o600)
    d = tmp_path / "c"
    d.mkdir()
    (d / "campaign.yaml").write_text(yaml.safe_dump({
        "name": "leak", "timeout": 30, "design": {"kind": "full"},
        "space": {"factors": [{"name": "n", "kind": "ordinal", "values": [1, 2]}],
                  "responses": [{"name": "v", "goal": "minimize"}]},
        # a root-only file shown needs the opt-in (A8-1)
        "sandbox": {"readable": [str(secret)], "allow_destructive": True},
        "runner": {"type": "command", "options": {
            "command": ["sh", "-c", f"cat {secret}; echo {{n}}"],
            "regex_metrics": ["(?P<v>[0-9]+)$"]}}}))
    p = storlab("run", str(d / "campaign.yaml"), timeout=120)
    assert p.returncode == 0 and "ok 2, failed 0" in p.stdout, p.stdout + p.stderr
    out = d / "campaign.db.output"
    files = sorted(out.iterdir())
    assert {f.name for f in files} == {"c1-r1.stdout", "c1-r1.stderr", "c2-r1.stdout",
                                       "c2-r1.stderr"}
    assert "s3cr3t" in (out / "c1-r1.stdout").read_text()
    assert {stat.S_IMODE(f.stat().st_mode) for f in files} == {0o600}
    assert stat.S_IMODE(out.stat().st_mode) == 0o700


def test_the_load_runs_as_a_child_inside_the_walls(
        tmp_path: Path, listener: tuple[str, list[str]], monkeypatch: Any) -> None:
    """The load is a child process in the run's sandbox, not storlab's own code: a load
    function broken in storlab's process changes nothing. Its records reach the scratch
    area; with the early check on `records_dir` skipped (as if it missed a route), a
    records file aimed outside cannot be written: the kernel's read-only walls refuse
    it, the measurement stands with a warning, the victim directory stays empty."""
    from storlab.campaign.runners import Declared, declared, objectstore, objload
    from storlab.campaign.runners._program import run_directory

    url, hits = listener
    camp, victim = tmp_path / "c", tmp_path / "victim"
    run = camp / "scratch" / "c1-r1"
    run.mkdir(parents=True)
    victim.mkdir()

    def boom(*args: Any, **kw: Any) -> Any:
        raise AssertionError("the load ran in storlab's own process")
    monkeypatch.setattr(objload, "load_rows", boom)
    monkeypatch.setattr(objectstore, "refused_records_dir", lambda *args: None)
    opts = {"api": "s3", "endpoint": url, "access_key": "a", "secret_key": "b",
            "duration": 1, "clients": 1, "objects": 2}
    pfd = os.open(run.parent, os.O_RDONLY | os.O_DIRECTORY)
    wfd = os.open(run, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with declared(Declared(homes=(str(camp),), network=True)), \
                run_directory(run, wfd, pfd):
            res = {rd: objectstore.ObjectStoreRunner(records_dir=rd, **opts).run(
                       {"object_size": "4KiB"}, run, timeout=60)
                   for rd in ("records", str(victim / "sub"), "../../victim")}
    finally:
        os.close(pfd)
        os.close(wfd)
    assert all(r.status == "ok" and r.metrics["requests"] > 0 for r in res.values()), res
    assert res["records"].stderr == ""
    rec = camp / "scratch" / "records" / "c1-r1.csv.gz"
    assert stat.S_IMODE(rec.stat().st_mode) == 0o600
    import gzip

    assert gzip.decompress(rec.read_bytes()).decode() == res["records"].raw
    for rd in (str(victim / "sub"), "../../victim"):
        assert "warning: records not written" in res[rd].stderr, res[rd].stderr
        assert "Read-only file system" in res[rd].stderr, res[rd].stderr
    assert list(victim.iterdir()) == []
    assert len(hits) > 10


def test_the_childs_records_text_is_the_tables() -> None:
    """The child writes its records without pandas: the same text the table gives."""
    import math

    from storlab.campaign.runners.objload import records_frame, records_to_csv, rows_to_csv

    rows = [(0.1234567, 0.2, 0.30000049, 0, 4096, 200, 0),
            (0.5, 0.5, 0.5, -1, 0, -1, 1), (0.75, math.nan, math.nan, -1, 0, -2, 2),
            (1.0, 1.25, 2.5, 2, 0, 404, 0), (3.0, 3.1, 3.2, 1, 65536, 0, 1)]
    assert rows_to_csv(rows) == records_to_csv(records_frame(rows))
    assert rows_to_csv([]) == records_to_csv(records_frame([]))


def test_an_endpoint_that_cannot_be_checked_is_told_the_way_out_its_sandbox_has(
        tmp_path: Path) -> None:
    """`cluster:` named with another endpoint, the cluster not up: with
    `sandbox.network: true` already declared, the line does not tell to declare it (the
    keys go to the cluster's own endpoint whatever the sandbox); without it, it does."""
    from storlab.campaign.runners import make_runner

    r = make_runner("objectstore", {"cluster": "ceph", "cluster_dir": str(tmp_path / "no"),
                                    "duration": 1})
    opts = r.job_options({"endpoint": "http://127.0.0.1:9"}, tmp_path)
    with_net = r.refused_grant(opts, False, False, True)
    assert with_net is not None and "cannot be checked against cluster ceph" in with_net
    assert "declare sandbox.network: true" not in with_net, with_net
    assert "go only to that cluster's endpoint" in with_net, with_net
    without = r.refused_grant(opts, False, False, False)
    assert without is not None and "declare sandbox.network: true" in without, without
