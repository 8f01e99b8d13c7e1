"""A user's input file is read once, from one descriptor: a check by path followed by a
second open of the path let another user put a FIFO at the name in between, and root's
storlab blocked in that open for ever (`estimate predict --model`, `simulate
--calibrate`). Real CLI, the swap made by another user (uid 65534) watching the file's
close with inotify."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

# stdlib only, run as another user: wait for the first close of FILE in DIR (storlab read it
# after checking it is a regular file), then rename a FIFO over FILE at once
SWAP = r'''
import ctypes, os, select, struct, sys
d, fname = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
libc.inotify_add_watch(fd, d.encode(), 0x10)  # IN_CLOSE_NOWRITE
fifo = os.path.join(d, ".fifo")
os.mkfifo(fifo, 0o644)
print("ready", flush=True)
while True:
    if not select.select([fd], [], [], 90)[0]:
        sys.exit("no close seen")
    buf = os.read(fd, 65536); i = 0
    while i < len(buf):
        _, _, _, n = struct.unpack_from("iIII", buf, i)
        name = buf[i + 16:i + 16 + n].rstrip(b"\0").decode(); i += 16 + n
        if name == fname:
            os.rename(fifo, os.path.join(d, fname))
            print("swapped", flush=True)
            sys.exit(0)
'''


def _model(d: Path) -> Path:
    text = (ROOT / "examples/estimate-quiet/out/model.json").read_text().rstrip()
    p = d / "model.json"
    p.write_text(text + " " * (20 << 20) + "\n")  # decoded after the close: the window
    return p


def _measurements(d: Path) -> Path:
    p = d / "m.csv"  # a table the fit refuses at once (no ops_s): only the reading counts
    p.write_text("# " + " " * (20 << 20) + "\nclients,object_size,op\n1,4096,GET\n")
    return p


CASES = {
    "estimate predict --model": (_model, lambda f: ["estimate", "predict", "--model", f,
                                                    "--read-pct", "70", "--sizes", "4k:1"],
                                 (0,), ""),
    "simulate --calibrate": (_measurements,
                             lambda f: ["simulate", str(ROOT / "examples/sim/small.yaml"),
                                        "--calibrate", f], (1, 2), "missing column 'ops_s'"),
}


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv (another user swaps the file)")
@pytest.mark.parametrize("case", list(CASES))
def test_a_fifo_renamed_over_an_input_after_its_check_does_not_block(
        case: str, storlab_argv: list[str]) -> None:
    make, argv, codes, said = CASES[case]
    top = Path(tempfile.mkdtemp(prefix="storlab-reopen-"))
    try:
        top.chmod(0o755)
        os.chown(top, 65534, 65534)
        f = make(top)
        os.chown(f, 65534, 65534)
        swap = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534",
                                 "--clear-groups", "/usr/bin/python3", "-c", SWAP, str(top),
                                 f.name], stdout=subprocess.PIPE, text=True)
        try:
            assert swap.stdout is not None and swap.stdout.readline().strip() == "ready"
            try:
                p = subprocess.run([*storlab_argv, *argv(str(f))], capture_output=True,
                                   text=True, timeout=60)
            except subprocess.TimeoutExpired:
                pytest.fail(f"{case}: storlab blocked on the FIFO put at the input's name")
            assert swap.wait(timeout=30) == 0  # the swap happened: the race was run
            assert p.returncode in codes and said in p.stderr, p.stdout + p.stderr
            assert "Traceback" not in p.stderr
        finally:
            if swap.poll() is None:
                swap.kill()
                swap.wait()
    finally:
        shutil.rmtree(top, ignore_errors=True)
