"""CAP_IPC_LOCK inside the walls: dropped unless the campaign declares `sandbox.lock_memory:
true`. Route: a root program of a run kept CAP_IPC_LOCK, so it could mlock any amount of
memory past its RLIMIT_MEMLOCK (locked pages are never reclaimed: the host, storlab and
its daemons, runs out). Real bwrap, a real program calling mlock, real fio."""

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
              pytest.mark.skipif(os.geteuid() != 0, reason="root keeps capabilities only")]

#: Lowers its own RLIMIT_MEMLOCK to 64 KiB (always allowed), then locks 4 MiB: past the
#: limit, which only CAP_IPC_LOCK lets a program do.
MLOCK = r"""
import ctypes, os, resource, sys
hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
lim = 64 << 10 if hard == resource.RLIM_INFINITY else min(64 << 10, hard)
resource.setrlimit(resource.RLIMIT_MEMLOCK, (lim, hard))
libc = ctypes.CDLL(None, use_errno=True)
n = 4 << 20
buf = ctypes.create_string_buffer(n)
if libc.mlock(buf, ctypes.c_size_t(n)) != 0:
    print(f"mlock: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
    sys.exit(1)
print("locked", n)
"""


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
    # the capability set itself, as the kernel reports it
    cap_ipc_lock = 1 << 14
    for decl, kept in ((Declared(), False), (Declared(lock_memory=True), True)):
        with declared(decl):
            out = run_program(["sh", "-c", "grep CapEff /proc/self/status"],
                              cwd=str(tmp_path))
        assert bool(int(out.stdout.split()[1], 16) & cap_ipc_lock) == kept, out.stdout


def _campaign(d: Path, runner: dict[str, Any], response: str = "y", **sandbox: Any
              ) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "campaign.yaml").write_text(yaml.safe_dump({
        "name": "lock", "timeout": 60, "design": {"configs": [{"n": 1}]},
        "space": {"factors": [{"name": "n", "kind": "ordinal", "values": [1, 2]}],
                  "responses": [{"name": response, "goal": "minimize"}]},
        "sandbox": sandbox, "runner": runner}, sort_keys=False))
    return d / "campaign.yaml"


def test_a_campaign_opts_in_and_status_says_so(tmp_path: Path, storlab: Any) -> None:
    cmd = {"type": "command", "options": {
        "command": [sys.executable, "-c", MLOCK + "\nprint('y=1')"],
        "regex_metrics": ["y=(?P<y>[0-9]+)"]}}
    plain = _campaign(tmp_path / "plain", cmd)
    r = storlab("run", str(plain), timeout=120)
    assert "ok 0, failed 1" in r.stdout, r.stdout + r.stderr
    assert "locked memory: up to RLIMIT_MEMLOCK (no CAP_IPC_LOCK)" in \
        storlab("status", str(plain)).stdout
    locks = _campaign(tmp_path / "lock", cmd, lock_memory=True)
    r = storlab("run", str(locks), timeout=120)
    assert r.returncode == 0 and "ok 1, failed 0" in r.stdout, r.stdout + r.stderr
    assert "locked memory: at will, CAP_IPC_LOCK kept (sandbox.lock_memory)" in \
        storlab("status", str(locks)).stdout
    bad = _campaign(tmp_path / "bad", cmd, lock_memory="yes please")
    r = storlab("run", str(bad), timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "sandbox.lock_memory" in lines[0], r.stderr


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
