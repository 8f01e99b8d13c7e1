"""The sandbox when storlab runs as a user, not root: Landlock's domain needs no_new_privs
then (the kernel refuses `landlock_restrict_self` to a process without CAP_SYS_ADMIN
otherwise). storlab's own path (`run_program`) runs as uid 65534 through `setpriv`, and
the program inside tries the host's abstract socket with the host's network shared."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from storlab.campaign.runners._sandbox import landlock_missing

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.skipif(shutil.which("setpriv") is None or os.geteuid() != 0,
                                 reason="needs root and setpriv to become another user"),
              pytest.mark.xdist_group("fio")]

SRC = str(Path(__file__).resolve().parents[2] / "src")

# run as the user: one program in the sandbox, the host's network shared and Unix sockets
# allowed (the two opt-ins that leave Landlock's scope the only wall before the socket)
AS_USER = r"""
import os, sys, tempfile
from storlab.campaign.runners._program import run_program
d = tempfile.mkdtemp()
code = ("import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n"
        " s.connect('\\0' + %r); print('reached')\nexcept OSError as e: print('refused', e)"
        % sys.argv[1])
r = run_program(["/usr/bin/python3", "-c", code], cwd=d, timeout=60, network=True,
                unix_sockets=True)
print("uid", os.getuid(), "exit", r.exit_code, r.stdout.strip(), r.stderr.strip()[-300:])
"""


@pytest.mark.skipif(not os.access("/usr/bin/python3", os.X_OK), reason="no /usr/bin/python3")
def test_landlock_scopes_hold_when_storlab_is_not_root() -> None:
    if landlock_missing() is not None:
        pytest.skip(f"Landlock: {landlock_missing()}")
    name = f"storlab-test-{uuid.uuid4().hex[:8]}"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind("\0" + name)
    listener.listen()
    listener.setblocking(False)
    here = tempfile.mkdtemp()
    os.chmod(here, 0o755)
    try:
        cp = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             sys.executable, "-c", AS_USER, name], cwd=here,
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": SRC})
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.startswith("uid 65534 exit 0 refused"), cp.stdout + cp.stderr
        with pytest.raises(BlockingIOError):  # nothing connected
            listener.accept()
    finally:
        listener.close()
        os.rmdir(here)


# 16 Landlock domains entered already: the kernel refuses a 17th (E2BIG), as it would
# refuse one on a system where the child cannot enter it
NESTED = r"""
import ctypes, struct
from storlab.campaign.runners._program import run_program
from storlab.campaign.runners._sandbox import landlock_ruleset
import sys
libc = ctypes.CDLL(None, use_errno=True)
if sys.argv[1] == "after":  # the probe passed before: the start itself must refuse
    assert run_program(["true"], cwd="/", timeout=60).exit_code == 0
assert libc.prctl(38, 1, 0, 0, 0) == 0
for _ in range(16):
    assert libc.syscall(446, landlock_ruleset(), 0) == 0
r = run_program(["true"], cwd="/", timeout=60)
print("exit", r.exit_code, r.stderr.strip())
"""


@pytest.mark.parametrize(("when", "said"), [
    ("first", "storlab: cannot sandbox the programs of a run: the kernel has Landlock but "
              "refused its domain"),
    ("after", "storlab: cannot start true in its sandbox: the child could not set up its "
              "guard or enter the Landlock domain")])
def test_a_domain_the_kernel_refuses_refuses_the_run(when: str, said: str) -> None:
    """Fail closed: when the child cannot enter Landlock's domain the program does not
    run (one line), it does not run without the scopes: refused by the probe before the
    first program, or by the start itself."""
    if landlock_missing() is not None:
        pytest.skip(f"Landlock: {landlock_missing()}")
    cp = subprocess.run([sys.executable, "-c", NESTED, when], capture_output=True,
                        text=True, timeout=120, env={**os.environ, "PYTHONPATH": SRC})
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.startswith(f"exit None {said}"), cp.stdout
    assert len(cp.stdout.strip().splitlines()) == 1, cp.stdout
