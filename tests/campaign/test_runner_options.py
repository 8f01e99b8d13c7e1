"""Every runner refuses options it does not know (a typo such as `regex_metric:` used to
run "ok" with no metrics): at construction for fixed options, at preflight for factors and
for fio's own option names (asked of the installed fio)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.runners import make_runner
from storlab.campaign.spec import CampaignError

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
needs = {p: pytest.mark.skipif(shutil.which(p) is None, reason=f"{p} not installed")
         for p in ("fio", "sysbench")}


@pytest.mark.parametrize("kind,options,word", [
    ("command", {"command": ["echo", "n: 1"], "regex_metric": ["n: (?P<n>\\d+)"]},
     "did you mean 'regex_metrics'"),
    ("command", {"command": ["echo"], "json_metric": {"a": "b"}}, "json_metrics"),
    ("command", {"command": "echo {x}", "shell": True, "y": 1}, "unknown option"),
    pytest.param("sysbench", {"file_total_sise": "1M"}, "file-total-size",
                 marks=needs["sysbench"]),
    ("postmark", {"numbr": 10}, "unknown option"),
    ("simulator", {"cluster": str(EXAMPLES / "sim" / "small.yaml"), "nodez": 4}, "nodez"),
    ("objectstore", {"cluster": "swift", "clientz": 4}, "clientz"),
    ("ceph", {"load": {"type": "rados_bench", "options": {"secs": 3}}}, "secs"),
    ("ceph", {"load": {"type": "objectstore", "options": {"durations": 3}}}, "durations"),
    ("ceph", {"load": {"type": "fio", "options": {"extra_args": ["job.fio"]}}},
     "extra_args"),
    ("ceph", {"lod": {}}, "lod"),
    ("fio", {"job_name": "a b]"}, "job_name"),
])
def test_unknown_runner_options_are_refused(kind: str, options: dict[str, Any],
                                            word: str) -> None:
    with pytest.raises(CampaignError, match=word):
        make_runner(kind, options)


@pytest.mark.parametrize("kind,options", [
    ("command", {"command": ["echo", "{x}"], "x": 1, "regex_metrics": []}),
    ("command", {"command": ["echo"], "env": {"A": "{x}"}, "x": 1,
                 "json_metrics": {"y": "y"}}),
    pytest.param("sysbench", {"file_total_size": "1M", "threads": 2, "time": 1},
                 marks=needs["sysbench"]),
    ("postmark", {"number": 10, "transactions": 20}),
    ("simulator", {"cluster": str(EXAMPLES / "sim" / "small.yaml"), "nodes": 4}),
    ("objectstore", {"cluster": "swift", "clients": 4, "read_pct": 70}),
    ("ceph", {"load": {"type": "rados_bench", "options": {"seconds": 3}}}),
])
def test_known_options_are_accepted(kind: str, options: dict[str, Any]) -> None:
    make_runner(kind, options)


@needs["fio"]
def test_fio_option_names_are_asked_of_the_installed_fio(tmp_path: Path) -> None:
    r = make_runner("fio", {"ioengine": "psync", "size": "1M"})
    with pytest.raises(CampaignError, match="did you mean 'iodepth'"):
        r.check_target({"iodeph": 4}, base=tmp_path)  # type: ignore[attr-defined]
    with pytest.raises(CampaignError, match="'hipri' is not an option"):
        r.check_target({"hipri": 1}, base=tmp_path)  # type: ignore[attr-defined]
    r.check_target({"iodepth": 4, "rw": "randread"}, base=tmp_path)  # type: ignore
    # fio's command-line options belong in extra_args (after --name they would misparse)
    with pytest.raises(CampaignError, match="command-line options"):
        r.check_target({"output": str(tmp_path / "out")}, base=tmp_path)  # type: ignore
    assert not (tmp_path / "out").exists()
    # `direct` is an option of its own, not an abbreviation of `directory`
    r.check_target({"direct": 1}, base=tmp_path)  # type: ignore[attr-defined]
    # an engine's own options count once the engine is named
    make_runner("fio", {"ioengine": "io_uring"}).check_target(  # type: ignore[attr-defined]
        {"hipri": 1}, base=tmp_path)


def _campaign(d: Path, runner: dict[str, Any], factors: list[dict[str, Any]]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump({"name": "t", "space": {"factors": factors},
                                 "design": {"kind": "full"}, "runner": runner,
                                 "timeout": 60}))
    return p


@pytest.mark.parametrize("runner,factors,word", [
    ({"type": "command", "options": {"command": ["echo", "n: {x}"],
                                     "regex_metric": ["n: (?P<n>\\d+)"]}},
     [{"name": "x", "kind": "ordinal", "values": [1, 2]}], "regex_metrics"),
    pytest.param({"type": "fio", "options": {"ioengine": "psync", "size": "1M"}},
                 [{"name": "iodeph", "kind": "ordinal", "values": [1, 2]}], "iodepth",
                 marks=needs["fio"]),
    pytest.param({"type": "sysbench", "options": {"file_total_size": "1M"}},
                 [{"name": "thread", "kind": "ordinal", "values": [1, 2]}], "thread",
                 marks=needs["sysbench"]),
    ({"type": "postmark", "options": {"number": 10}},
     [{"name": "transaction", "kind": "ordinal", "values": [10, 20]}], "transaction"),
])
def test_storlab_run_refuses_with_one_line_before_anything_runs(
        tmp_path: Path, runner: dict[str, Any], factors: list[dict[str, Any]],
        word: str, storlab: Any) -> None:
    camp = _campaign(tmp_path / "c", runner, factors)
    p = storlab("run", str(camp), timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert word in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "c" / "campaign.db").exists()


@pytest.mark.parametrize("load_options,factors,word", [
    ({"seconds": "--conf=/tmp/evil.conf"}, [], "options.seconds"),
    ({"block_size": True}, [], "options.block_size"),
    ({"mode": "write --no-cleanup"}, [], "options.mode"),
    ({"seconds": 1}, [{"name": "concurrency", "kind": "categorical",
                       "values": [16, "-c/etc/passwd"]}], "factor concurrency"),
    ({"seconds": 1}, [{"name": "block_size", "kind": "ordinal",
                       "values": [4096, 4.5]}], "factor block_size"),
])
def test_rados_bench_takes_only_its_options_with_values_of_their_type(
        tmp_path: Path, load_options: dict[str, Any], factors: list[dict[str, Any]],
        word: str, storlab: Any) -> None:
    """rados bench's options reach its argv: `mode` one of its modes, the others whole
    numbers in bounds; anything else (a word rados would read as its own option, a bool,
    a fraction) is refused before any run in one line naming the file and the field."""
    runner = {"type": "ceph", "options": {
        "load": {"type": "rados_bench", "options": load_options}}}
    camp = _campaign(tmp_path / "c", runner, factors or [
        {"name": "x_unused", "kind": "ordinal", "values": [1, 2]}])
    p = storlab("run", str(camp), timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert word in p.stderr and "campaign.yaml" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert not (tmp_path / "c" / "campaign.db").exists()
