"""A run's directory stays out of other users' reach even when storlab is SIGKILLed
mid-run. The program is root inside and its directory the root of its writable bind: it
copied a root-only file there, made the copy 0644 and the directory 0755, and kept
running; storlab's SIGKILL (the OOM killer, `kill -9`) skipped the end of the run that puts
the directory back to 0700, and another user read the copy through the 0711 scratch area
until the campaign ran again. Now the scratch area is root's 0700 (no program can change
it: read-only inside), and inside the walls it shows as an empty 0711 file system holding
only the run's directory. Real storlab, real SIGKILL, a real uid switch."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None
                                 or shutil.which("bwrap") is None,
                                 reason="root, setpriv (another user reads) and bwrap"),
              pytest.mark.xdist_group("lock")]


def _as_nobody(*argv: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           *argv], capture_output=True, text=True, timeout=30)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory under /tmp every user may enter (0755), removed after."""
    top = Path(tempfile.mkdtemp(prefix="storlab-a10-7-", dir="/tmp"))
    top.chmod(0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def secret() -> Iterator[Path]:
    p = Path("/etc") / f"storlab-test-a10-7-{os.getpid()}"
    p.write_text(f"ROOT-ONLY-{os.urandom(6).hex()}\n")
    p.chmod(0o600)
    try:
        yield p
    finally:
        p.unlink()


def test_a_killed_runs_opened_directory_stays_unreachable(
        open_dir: Path, secret: Path, storlab_argv: list[str],
        command_campaign: Callable[..., Path]) -> None:
    d = open_dir / "c"
    camp = command_campaign(d, ["sh", "-c", f"cp {secret} copy; chmod 644 copy; chmod 755 .; "
                                "sleep 60; echo '{\"y\": 1}'"], timeout=120)
    d.chmod(0o755)
    camp.chmod(0o644)
    p = subprocess.Popen([*storlab_argv, "run", str(camp), "-q"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    run_dir = d / "scratch" / "c1-r1"
    copy = run_dir / "copy"
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            if copy.exists() and stat.S_IMODE(run_dir.stat().st_mode) == 0o755:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the program never opened its directory")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    time.sleep(1)  # the program dies with its walls (bwrap's parent-death signal)
    # the premise: nothing put the directory back (the run never ended in storlab)
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o755
    assert stat.S_IMODE(copy.stat().st_mode) == 0o644
    assert copy.read_text() == secret.read_text()
    # another user reaches neither the copy nor the scratch area's listing
    r = _as_nobody("cat", str(copy))
    assert r.returncode != 0 and "ROOT-ONLY" not in r.stdout, r
    assert _as_nobody("ls", str(d / "scratch")).returncode != 0
    st = (d / "scratch").stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o700)


#: The program: what it sees of the directory above its own.
LOOK = r"""
import json, os, stat
print(json.dumps({"y": 1, "got": [sorted(os.listdir("..")),
                                  oct(stat.S_IMODE(os.stat("..").st_mode)),
                                  os.path.basename(os.getcwd())]}))
"""


def test_inside_the_walls_the_scratch_area_holds_only_the_run(
        open_dir: Path, command_campaign: Callable[..., Path],
        program_got: Callable[[Path], Any]) -> None:
    """Another run's directory kept in the scratch area is not shown; the area is 0711
    inside (a program that switches user passes it), 0700 on the host."""
    d = open_dir / "c"
    camp = command_campaign(d, ["/usr/bin/python3", "-c", LOOK])
    kept = d / "scratch" / "c9-r1"
    kept.mkdir(parents=True)
    (kept / "kept.txt").write_text("another run's\n")
    got = program_got(camp)
    assert got == [["c1-r1"], "0o711", "c1-r1"], got
    assert stat.S_IMODE((d / "scratch").stat().st_mode) == 0o700
    assert (kept / "kept.txt").exists()
