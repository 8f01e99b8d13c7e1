"""The runner contract, checked over every runner the way scikit-learn's `check_estimator`
checks every estimator (DESIGN.md). Each runner, from the campaign's registry, with tiny
real runs of the real program:

- shape: a finished run is a `RunResult` of the same shape whatever the runner (status,
  flat numeric metrics, text raw/stderr, an int or no exit code, start <= end, rows as a
  list of flat dicts), and its metrics keep the same names from one run to the next;
- a bad option is refused before anything runs, with one line (a StorlabError) naming it;
- a timeout is honoured: a run longer than its timeout ends as `timeout` (the
  objectstore runner refuses, as a failed run, a load longer than the timeout before it
  starts), within a few seconds of it; the simulator, in-process, checks it afterwards;
- nothing is left running after a run, finished or timed out (no process below the test,
  none carrying the run's tag).

fio, postmark and sysbench are skipped where not installed; objectstore and ceph need a
real cluster (Swift, Ceph memstore), brought up once per module as tests/clusters does,
and run only as root with the packages (the marks of the existing cluster tests)."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.campaign import Campaign
from storlab.campaign.runners import REGISTRY, RunResult, is_metric, make_runner
from storlab.campaign.runners._program import TAG_ENV, run_tag
from storlab.errors import StorlabError

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "sim" / "small.yaml"
PY = sys.executable
STATUSES = ("ok", "failed", "timeout")
#: Runners whose declared metric names (`runners.METRICS`) cover every metric they report;
#: a command's are its user's, Ceph's its load's, and the object store's load also reports
#: `duration_s` and `conn_errors`, which the analyses have never treated as metrics.
DECLARES_ALL = ("fio", "postmark", "sysbench", "simulator")


@dataclass
class Case:
    """One runner under the contract: options and a configuration for a tiny ok run,
    a configuration that outlasts `timeout`, and a bad option with the word the error
    must name."""

    kind: str
    options: Callable[[Path], dict[str, Any]]
    config: dict[str, Any]
    slow: dict[str, Any]
    bad: dict[str, Any]
    names: str
    timeout: float = 2.0
    timeout_status: tuple[str, ...] = ("timeout",)
    bounded: bool = True  # the run returns soon after its timeout
    needs: tuple[str, ...] = ()
    marks: list[Any] = field(default_factory=list)


_SWIFT = ("swift-proxy-server", "swift-object-server", "swift-account-server",
          "swift-container-server", "swift-ring-builder", "memcached", "mkfs.xfs", "losetup")
_CEPH = ("ceph-mon", "ceph-mgr", "ceph-osd", "ceph", "rados")


def _cluster_marks(what: str, programs: tuple[str, ...]) -> list[Any]:
    # the cluster tests' own groups (tests/clusters): one module-scoped cluster each
    return [pytest.mark.xdist_group("ceph" if what == "Ceph" else "clusters"),
            pytest.mark.skipif(os.geteuid() != 0, reason=f"a {what} cluster needs root"),
            pytest.mark.skipif(any(shutil.which(p) is None for p in programs),
                               reason=f"{what} packages missing: run scripts/sysdeps.sh")]


CASES = [
    Case("fio", lambda d: {"ioengine": "psync", "size": "1M", "runtime": "300ms",
                           "time_based": 1},
         {"rw": "randread", "bs": "4k"}, {"rw": "randread", "runtime": "60s"},
         {"bogus_option": 1}, "bogus_option", needs=("fio",)),
    Case("command", lambda d: {"command": [PY, "-c", "import json,sys; print(json.dumps("
                                                     "{{'y': float(sys.argv[1])}}))", "{x}"],
                               "json_metrics": {"y": "y"}},
         {"x": 3}, {"x": 1, "sleep": 60}, {"bogus": 1}, "bogus"),
    Case("postmark", lambda d: {"number": 50, "transactions": 100, "min_size": 512,
                                "max_size": 4096},
         {"read": 512}, {"number": 2000, "transactions": 10**8}, {"bogus": 1}, "bogus",
         needs=("postmark",)),
    Case("sysbench", lambda d: {"file_total_size": "4M", "file_num": 2, "time": 1},
         {"file_test_mode": "rndrd"}, {"file_test_mode": "rndrd", "time": 60},
         {"bogus": 1}, "bogus", timeout=3.0, needs=("sysbench",)),
    Case("simulator", lambda d: {"cluster": str(SMALL), "requests": 2000},
         {"nodes": 4}, {"nodes": 4, "requests": 20000}, {"bogus_key": 3}, "bogus_key",
         timeout=1e-3, bounded=False),
    Case("objectstore", lambda d: {"cluster": "swift", "cluster_dir": str(d),
                                   "duration": 1, "objects": 5, "clients": 2},
         {"read_pct": 50}, {"read_pct": 50, "duration": 30}, {"bogus": 1}, "bogus",
         timeout=5.0, timeout_status=("failed",), marks=_cluster_marks("Swift", _SWIFT)),
    Case("ceph", lambda d: {"cluster_dir": str(d), "load": {
        "type": "rados_bench", "options": {"seconds": 1, "block_size": 4096,
                                           "concurrency": 2}}},
         {}, {"seconds": 60}, {"load": {"type": "nope"}}, "nope", timeout=4.0,
         marks=_cluster_marks("Ceph", _CEPH)),
]


def test_every_registered_runner_is_under_the_contract() -> None:
    assert sorted(c.kind for c in CASES) == sorted(REGISTRY)


# --------------------------------------------------------------------------- clusters
@pytest.fixture(scope="module")
def swift_dir(swift_cluster: Any) -> Path:
    """The session's Swift (tests/conftest.py), shared with tests/clusters' Swift tests."""
    return swift_cluster[1]


@pytest.fixture(scope="module")
def ceph_dir(ceph_cluster: Any) -> Path:
    """The session's Ceph (tests/conftest.py), shared with tests/clusters' Ceph tests."""
    return ceph_cluster[1]


@pytest.fixture(params=[pytest.param(c, id=c.kind, marks=c.marks) for c in CASES])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Case, dict[str, Any]]:
    c: Case = request.param
    missing = [p for p in c.needs if shutil.which(p) is None]
    if missing:
        pytest.skip(f"{missing} not installed")
    base = tmp_path
    if c.kind == "objectstore":
        base = request.getfixturevalue("swift_dir")
    elif c.kind == "ceph":
        base = request.getfixturevalue("ceph_dir")
    return c, c.options(base)


# --------------------------------------------------------------------------- processes
def _children() -> set[tuple[int, str]]:
    """Live processes below this one, as (pid, program)."""
    kids: dict[int, list[int]] = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open(f"/proc/{e}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] not in "ZX":
                kids.setdefault(int(fields[1]), []).append(int(e))
    out, todo = set(), [os.getpid()]
    while todo:
        for c in kids.get(todo.pop(), []):
            try:
                prog = Path(f"/proc/{c}/cmdline").read_bytes().split(b"\0")[0].decode()
            except OSError:
                continue
            out.add((c, prog))
            todo.append(c)
    return out


def _tagged(tag: str) -> list[int]:
    """Processes whose environment carries the run's tag."""
    needle = f"{TAG_ENV}={tag}".encode()
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit() and int(e) != os.getpid():
            try:
                env = Path(f"/proc/{e}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if needle in env:
                out.append(int(e))
    return out


def _run(runner: Any, config: dict[str, Any], workdir: Path, timeout: float | None
         ) -> tuple[RunResult, float]:
    """One run as an executor does it (tagged), checked to leave nothing running."""
    workdir.mkdir(parents=True, exist_ok=True)  # the executor makes it (task.py)
    before = _children()
    t0 = time.monotonic()
    with run_tag(str(workdir)):
        res = runner.run(config, workdir, timeout)
    took = time.monotonic() - t0
    # a killed group may take a moment to be reaped (waited for: 10 s cost nothing when
    # all is gone at once, and a loaded machine may need more than a moment)
    deadline = time.monotonic() + 10.0
    while True:
        left = _children() - before
        tagged = _tagged(str(workdir))
        if (not left and not tagged) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not left, f"{runner.name}: left running after the run: {sorted(left)}"
    assert not tagged, f"{runner.name}: processes with the run's tag left: {tagged}"
    return res, took


def _check_shape(res: RunResult, kind: str) -> None:
    assert isinstance(res, RunResult), type(res)
    assert res.status in STATUSES, res.status
    assert isinstance(res.metrics, dict)
    for k, v in res.metrics.items():
        assert isinstance(k, str) and k, k
        assert isinstance(v, (int, float)) and not isinstance(v, bool), (k, v)
        assert not isinstance(v, float) or not math.isinf(v), (k, v)
    assert isinstance(res.raw, str) and isinstance(res.stderr, str)
    assert res.exit_code is None or isinstance(res.exit_code, int)
    assert isinstance(res.started, float) and isinstance(res.ended, float)
    assert 0 < res.started <= res.ended <= time.time() + 1
    assert isinstance(res.rows, list)
    for row in res.rows:
        assert isinstance(row, dict) and all(isinstance(k, str) for k in row)
        json.dumps(row)  # the store keeps rows as JSON
    if res.ok:
        assert res.metrics, f"{kind}: an ok run without metrics"


# --------------------------------------------------------------------------- the contract
def test_result_shape_and_nothing_left_running(case: tuple[Case, dict[str, Any]],
                                               tmp_path: Path) -> None:
    c, opts = case
    runner = make_runner(c.kind, opts)
    assert runner.name == c.kind
    first, _ = _run(runner, dict(c.config), tmp_path / "r1", 120)
    _check_shape(first, c.kind)
    assert first.ok, f"{c.kind}: {first.stderr}"
    second, _ = _run(runner, dict(c.config), tmp_path / "r2", 120)
    assert second.ok and set(second.metrics) == set(first.metrics)  # stable columns
    if c.kind in DECLARES_ALL:  # what the analyses never read as a setting
        assert [k for k in first.metrics if not is_metric(k, [c.kind])] == []
    names = getattr(runner, "metric_names", None)
    if callable(names):  # what a tuning objective is checked against
        assert set(names()) & set(first.metrics)


def test_a_bad_option_is_one_line_before_anything_runs(case: tuple[Case, dict[str, Any]],
                                                       tmp_path: Path) -> None:
    c, opts = case
    camp = tmp_path / "campaign.yaml"
    camp.write_text(yaml.safe_dump({
        "name": "contract", "space": {"factors": [{"name": "z", "values": [1, 2]}]},
        "design": {"kind": "full"}, "runner": {"type": c.kind, "options": {**opts, **c.bad},
                                               "exclude": ["z"]}}))
    before = _children()
    with pytest.raises(StorlabError) as exc:
        Campaign.load(camp).preflight()
    msg = str(exc.value)
    assert "\n" not in msg and c.names in msg, msg
    assert str(camp) in msg
    assert not (tmp_path / "campaign.db").exists() and not (tmp_path / "scratch").exists()
    assert _children() <= before


def test_a_timeout_is_honoured(case: tuple[Case, dict[str, Any]], tmp_path: Path) -> None:
    c, opts = case
    slow = dict(c.slow)
    options = dict(opts)
    if c.kind == "command":  # the program itself outlasts the timeout
        options["command"] = [PY, "-c", "import time; time.sleep(60)"]
        slow = {}
    if c.kind == "ceph":
        options["load"] = {"type": "rados_bench", "options": {
            **opts["load"]["options"], **slow}}
        slow = {}
    runner = make_runner(c.kind, options)
    res, took = _run(runner, slow, tmp_path / "r1", c.timeout)
    _check_shape(res, c.kind)
    assert res.status in c.timeout_status, (res.status, res.stderr)
    if c.timeout_status == ("failed",):
        assert "timeout" in res.stderr
    if c.bounded:
        assert took < c.timeout + 15, f"{c.kind}: {took:.1f} s for a {c.timeout} s timeout"
