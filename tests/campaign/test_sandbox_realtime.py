"""CAP_SYS_NICE inside the walls: dropped unless the campaign declares `sandbox.realtime:
true`. Route found by an attacker: a command run did `chrt -f 99` (SCHED_FIFO 99, a
spinning thread starves its CPU: the host's daemons and storlab too). Real bwrap, real
chrt and fio."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.runners import Declared, declared, run_program

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.skipif(shutil.which("chrt") is None, reason="chrt not installed")]


def test_chrt_fails_inside_by_default_and_works_when_declared(tmp_path: Path) -> None:
    argv = ["chrt", "-f", "99", "true"]
    with declared(Declared()):
        out = run_program(argv, cwd=str(tmp_path), timeout=60)
    assert out.exit_code != 0, out.stderr
    assert "sandbox.realtime: true" in out.stderr, out.stderr  # the hint says what
    with declared(Declared(realtime=True)):
        out = run_program(argv, cwd=str(tmp_path), timeout=60)
    assert out.exit_code == 0, out.stderr
    # a negative nice value: `nice` warns and keeps the inherited niceness without the
    # capability (this process's: the suite may run under `nice`), lowers it with it
    base = os.nice(0)
    for decl, said in ((Declared(), str(base)), (Declared(realtime=True), str(base - 5))):
        with declared(decl):
            out = run_program(["nice", "-n", "-5", "nice"], cwd=str(tmp_path), timeout=60)
        assert out.stdout.strip() == said, (out.stdout, out.stderr)
    # the capability set itself, as the kernel reports it
    with declared(Declared()):
        out = run_program(["sh", "-c", "grep CapEff /proc/self/status"], cwd=str(tmp_path))
    cap_sys_nice = 1 << 23
    assert not int(out.stdout.split()[1], 16) & cap_sys_nice, out.stdout


def _campaign(d: Path, runner: dict[str, Any], response: str = "y", **sandbox: Any
              ) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "campaign.yaml").write_text(yaml.safe_dump({
        "name": "rt", "timeout": 60, "design": {"configs": [{"n": 1}]},
        "space": {"factors": [{"name": "n", "kind": "ordinal", "values": [1, 2]}],
                  "responses": [{"name": response, "goal": "minimize"}]},
        "sandbox": sandbox, "runner": runner}, sort_keys=False))
    return d / "campaign.yaml"


def test_a_campaign_opts_in_and_status_says_so(tmp_path: Path, storlab: Any) -> None:
    cmd = {"type": "command", "options": {
        "command": ["sh", "-c", "chrt -f 99 true && echo y=1"],
        "regex_metrics": ["y=(?P<y>[0-9]+)"]}}
    plain = _campaign(tmp_path / "plain", cmd)
    r = storlab("run", str(plain), timeout=120)
    assert "ok 0, failed 1" in r.stdout, r.stdout + r.stderr
    assert "CPU and I/O priority: not raised (no CAP_SYS_NICE)" in \
        storlab("status", str(plain)).stdout
    rt = _campaign(tmp_path / "rt", cmd, realtime=True)
    r = storlab("run", str(rt), timeout=120)
    assert r.returncode == 0 and "ok 1, failed 0" in r.stdout, r.stdout + r.stderr
    assert "CPU and I/O priority: raised at will, CAP_SYS_NICE kept (sandbox.realtime)" in \
        storlab("status", str(rt)).stdout
    # a bad value: one line naming the field
    bad = _campaign(tmp_path / "bad", cmd, realtime="yes please")
    r = storlab("run", str(bad), timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "sandbox.realtime" in lines[0], r.stderr


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_fio_real_time_io_class_is_refused_before_any_run_unless_declared(
        tmp_path: Path, storlab: Any) -> None:
    fio = {"type": "fio", "exclude": ["n"], "options": {
        "rw": "read", "size": "64k", "bs": "4k", "ioengine": "psync", "prioclass": 1,
        "prio": 0}}
    r = storlab("run", str(_campaign(tmp_path / "a", fio, "read_iops")), timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "fio prioclass=1" in lines[0] and "sandbox.realtime: true" in lines[0]
    r = storlab("run", str(_campaign(tmp_path / "b", fio, "read_iops", realtime=True)), timeout=120)
    assert r.returncode == 0 and "ok 1, failed 0" in r.stdout, r.stdout + r.stderr
    # a best-effort priority needs nothing
    fio["options"] = {**fio["options"], "prioclass": 2, "prio": 3}
    r = storlab("run", str(_campaign(tmp_path / "c", fio, "read_iops")), timeout=120)
    assert r.returncode == 0 and "ok 1, failed 0" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("opts, said", [
    ({"prioclass": "1"}, "prioclass=1"), ({"cmdprio_class": "2:1"}, "cmdprio_class=2:1"),
    ({"nice": "-5"}, "nice=-5"), ({"nice": "5"}, None), ({"nice": "-0"}, None),
    ({"prioclass": "2", "prio": "0"}, None), ({"cpus_allowed": "0"}, None)])
def test_which_fio_options_need_the_capability(opts: dict[str, str], said: str | None
                                               ) -> None:
    from storlab.campaign.runners.fio import FioRunner

    why = FioRunner(rw="read").realtime_reason(opts)
    assert (why is None) if said is None else (why is not None and said in why), why


@pytest.mark.parametrize("opts, said", [
    ({"cmdprio_percentage": "50"}, "cmdprio_percentage=50 with no cmdprio_class"),
    ({"cmdprio_bssplit": "4k/50"}, "cmdprio_bssplit=4k/50 with no cmdprio_class"),
    ({"cmdprio_bssplit": "4k/50/2/0:8k/10/1/0"}, "a real-time class entry"),
    ({"cmdprio_percentage": "0,50", "cmdprio_class": "2"}, None),
    ({"cmdprio_percentage": "50,0", "cmdprio_class": "2,0"}, None),
    ({"cmdprio_bssplit": "4k/50/2/0"}, None), ({"cmdprio_percentage": "0"}, None)])
def test_cmdprio_without_a_class_is_the_real_time_class(opts: dict[str, str],
                                                        said: str | None) -> None:
    """fio's cmdprio_class defaults to the real-time class for a direction that
    cmdprio_percentage or cmdprio_bssplit gives a share."""
    from storlab.campaign.runners.fio import FioRunner

    why = FioRunner(rw="read").realtime_reason(opts)
    assert (why is None) if said is None else (why is not None and said in why), why


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_fio_cmdprio_needs_the_declaration_and_says_so(tmp_path: Path, storlab: Any) -> None:
    """Real fio, libaio, O_DIRECT on a file of the run: cmdprio_percentage alone is the
    real-time class (EPERM on every I/O without CAP_SYS_NICE): refused before any run,
    and a run that meets it anyway (no preflight) names the declaration."""
    opts = {"rw": "randread", "size": "1m", "bs": "4k", "ioengine": "libaio",
            "direct": 1, "runtime": "1", "time_based": 1, "cmdprio_percentage": 50}
    fio = {"type": "fio", "exclude": ["n"], "options": opts}
    r = storlab("run", str(_campaign(tmp_path / "a", fio, "read_iops")), timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "cmdprio_percentage=50" in lines[0] and "sandbox.realtime: true" in lines[0]
    r = storlab("run", str(_campaign(tmp_path / "b", fio, "read_iops", realtime=True)),
                timeout=120)
    assert r.returncode == 0 and "ok 1, failed 0" in r.stdout, r.stdout + r.stderr
    fio["options"] = {**opts, "cmdprio_class": 2}
    r = storlab("run", str(_campaign(tmp_path / "c", fio, "read_iops")), timeout=120)
    assert r.returncode == 0 and "ok 1, failed 0" in r.stdout, r.stdout + r.stderr
    # the run-time hint, for what gets past the check (fio says EPERM before its JSON)
    (tmp_path / "d").mkdir()
    argv = ["fio", "--name=t", "--filename=f", "--output-format=json",
            *(f"--{k}={v}" for k, v in opts.items())]
    with declared(Declared()):
        out = run_program(argv, cwd=str(tmp_path / "d"), timeout=60)
    assert out.exit_code != 0 and "sandbox.realtime: true" in out.stderr, out.stderr
