"""CAP_SYS_NICE inside the walls: dropped unless the campaign declares `sandbox.realtime:
true`. Route found by an attacker: a command run did `chrt -f 99` (SCHED_FIFO 99, a
spinning thread starves its CPU: the host's daemons and storlab too). Real bwrap, real
chrt and fio. And CAP_IPC_LOCK: dropped unless the campaign declares
`sandbox.lock_memory: true` (a root program kept it: it could mlock any amount of memory
past its RLIMIT_MEMLOCK, pages never reclaimed). A real program calling mlock, real fio."""

from __future__ import annotations

import os
import resource
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.runners import Declared, declared, run_program

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.skipif(shutil.which("chrt") is None, reason="chrt not installed")]
#: A test of CAP_IPC_LOCK kept: only root's programs have it to keep.
ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="only root's programs hold CAP_IPC_LOCK")


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


#: Locks 4 MiB with mlock (exit 1 and the error when refused).
LOCK_4M = r"""
libc = ctypes.CDLL(None, use_errno=True)
n = 4 << 20
buf = ctypes.create_string_buffer(n)
if libc.mlock(buf, ctypes.c_size_t(n)) != 0:
    print(f"mlock: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
    sys.exit(1)
print("locked", n)
"""

#: Lowers its own RLIMIT_MEMLOCK to 64 KiB (always allowed), then locks 4 MiB: past the
#: limit, which only CAP_IPC_LOCK lets a program do.
MLOCK = r"""
import ctypes, os, resource, sys
hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
lim = 64 << 10 if hard == resource.RLIM_INFINITY else min(64 << 10, hard)
resource.setrlimit(resource.RLIMIT_MEMLOCK, (lim, hard))
""" + LOCK_4M

#: Raises its soft RLIMIT_MEMLOCK to its hard one (any process may: no capability), then
#: locks 4 MiB.
RAISE_MLOCK = r"""
import ctypes, os, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
print("limits", soft, hard, flush=True)
resource.setrlimit(resource.RLIMIT_MEMLOCK, (hard, hard))
""" + LOCK_4M


@pytest.mark.parametrize("key, program, off, on", [
    ("realtime", ["sh", "-c", "chrt -f 99 true && echo y=1"],
     "CPU and I/O priority: not raised (no CAP_SYS_NICE)",
     "CPU and I/O priority: raised at will, CAP_SYS_NICE kept (sandbox.realtime)"),
    pytest.param("lock_memory", [sys.executable, "-c", MLOCK + "\nprint('y=1')"],
                 "locked memory: up to RLIMIT_MEMLOCK (no CAP_IPC_LOCK)",
                 "locked memory: at will, CAP_IPC_LOCK kept (sandbox.lock_memory)",
                 marks=ROOT)])
def test_a_campaign_opts_in_and_status_says_so(tmp_path: Path, storlab: Any, key: str,
                                               program: list[str], off: str, on: str
                                               ) -> None:
    cmd = {"type": "command", "options": {
        "command": program, "regex_metrics": ["y=(?P<y>[0-9]+)"]}}
    plain = _campaign(tmp_path / "plain", cmd)
    r = storlab("run", str(plain), timeout=120)
    assert "ok 0, failed 1" in r.stdout, r.stdout + r.stderr
    assert off in storlab("status", str(plain)).stdout
    kept = _campaign(tmp_path / "kept", cmd, **{key: True})
    r = storlab("run", str(kept), timeout=120)
    assert r.returncode == 0 and "ok 1, failed 0" in r.stdout, r.stdout + r.stderr
    assert on in storlab("status", str(kept)).stdout
    # a bad value: one line naming the field
    bad = _campaign(tmp_path / "bad", cmd, **{key: "yes please"})
    r = storlab("run", str(bad), timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and f"sandbox.{key}" in lines[0], r.stderr


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


@ROOT
def test_mlock_past_the_limit_fails_by_default_and_works_when_declared(tmp_path: Path
                                                                       ) -> None:
    argv = [sys.executable, "-c", MLOCK]
    with declared(Declared()):
        out = run_program(argv, cwd=str(tmp_path), timeout=60)
    assert out.exit_code != 0 and "mlock: Cannot allocate memory" in out.stderr, out.stderr
    assert "sandbox.lock_memory: true" in out.stderr, out.stderr  # the hint says what
    with declared(Declared(lock_memory=True)):
        out = run_program(argv, cwd=str(tmp_path), timeout=60)
    assert out.exit_code == 0 and out.stdout.strip() == f"locked {4 << 20}", out.stderr
    # started with a soft limit of 64 KiB under a higher hard one (`LimitMEMLOCK=infinity`
    # is the same, unbounded): the program raises its soft limit and locks 4 MiB, which
    # holds only if its hard limit was left above the soft one
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if hard != resource.RLIM_INFINITY and hard < 8 << 20:
        pytest.skip("hard RLIMIT_MEMLOCK below 8 MiB here: nothing to raise to")
    argv = [sys.executable, "-c", RAISE_MLOCK]
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (64 << 10, hard))
    try:
        outs = {}
        for decl in (Declared(), Declared(lock_memory=True)):
            with declared(decl):
                outs[decl.lock_memory] = run_program(argv, cwd=str(tmp_path), timeout=60)
    finally:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (soft, hard))
    out = outs[False]
    assert out.exit_code != 0 and f"limits {64 << 10} {64 << 10}" in out.stdout, (
        out.stdout, out.stderr)
    assert "mlock: Cannot allocate memory" in out.stderr, out.stderr
    out = outs[True]  # declared: the hard limit is left as it was (and the capability kept)
    assert out.exit_code == 0 and f"limits {64 << 10} {hard}" in out.stdout, out.stderr
    # the capability set itself, as the kernel reports it
    cap_ipc_lock = 1 << 14
    for decl, kept in ((Declared(), False), (Declared(lock_memory=True), True)):
        with declared(decl):
            out = run_program(["sh", "-c", "grep CapEff /proc/self/status"],
                              cwd=str(tmp_path))
        assert bool(int(out.stdout.split()[1], 16) & cap_ipc_lock) == kept, out.stdout


@ROOT
@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_fio_lockmem_past_the_limit_is_refused_before_any_run_unless_declared(
        tmp_path: Path, storlab: Any) -> None:
    soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    if soft == resource.RLIM_INFINITY or soft > 64 << 20:
        pytest.skip("RLIMIT_MEMLOCK unlimited or above 64 MiB here: nothing to refuse")
    big = f"{(soft >> 20) + 8}m"
    fio = {"type": "fio", "exclude": ["n"], "options": {
        "rw": "read", "size": "64k", "bs": "4k", "ioengine": "psync", "lockmem": big}}
    r = storlab("run", str(_campaign(tmp_path / "a", fio, "read_iops")), timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert f"fio lockmem={big}" in lines[0] and "sandbox.lock_memory: true" in lines[0]
    r = storlab("run", str(_campaign(tmp_path / "b", fio, "read_iops", lock_memory=True)),
                timeout=120)
    assert r.returncode == 0 and "ok 1, failed 0" in r.stdout, r.stdout + r.stderr
    # within the limit: needs nothing
    fio["options"] = {**fio["options"], "lockmem": "64k"}
    r = storlab("run", str(_campaign(tmp_path / "c", fio, "read_iops")), timeout=120)
    assert r.returncode == 0 and "ok 1, failed 0" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("value, refused", [("1g", True), ("0", False), ("4k", False),
                                            ("lots", True)])
def test_which_lockmem_values_need_the_capability(value: str, refused: bool) -> None:
    from storlab.campaign.runners.fio import FioRunner

    soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    if value == "1g" and (soft == resource.RLIM_INFINITY or soft >= 1 << 30):
        pytest.skip("RLIMIT_MEMLOCK at or above 1 GiB here")
    why = FioRunner(rw="read").lockmem_reason({"lockmem": value})
    assert (why is not None and f"lockmem={value}" in why) if refused else why is None, why
