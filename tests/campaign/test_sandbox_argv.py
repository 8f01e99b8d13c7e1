"""What a run's program is handed (its environment, the walls' options) is not in bwrap's
argv, which every local user reads through /proc/PID/cmdline: bwrap reads its options from
a descriptor (`--args FD`). Before, a token in a command runner's `env:` (or in a variable
named by `sandbox.env_pass`) sat in `/proc/<bwrap pid>/cmdline` for the whole run. Real
storlab, real bwrap: the program blocks reading a FIFO while every cmdline is read."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import yaml

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)
SECRET = "tok-s3cr3t-f18"
PASSED = "pass-s3cr3t-f18"


def _cmdlines() -> dict[int, bytes]:
    out = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                out[int(p.name)] = (p / "cmdline").read_bytes()
            except OSError:  # ended meanwhile
                pass
    return out


def test_no_cmdline_shows_the_programs_environment(tmp_path: Path, storlab_forked: Any
                                                   ) -> None:
    d = tmp_path / "c"
    d.mkdir()
    fifo = d / "go"
    os.mkfifo(fifo)
    (d / "campaign.yaml").write_text(yaml.safe_dump({
        "name": "argv", "design": {"kind": "full"}, "repetitions": 1, "timeout": 60,
        "space": {"factors": [{"name": "x", "kind": "categorical", "values": ["a", "b"]}],
                  "responses": [{"name": "v", "goal": "minimize"}]},
        "sandbox": {"env_pass": ["F18_PASSED"]},
        "runner": {"type": "command", "options": {
            "command": ["sh", "-c", f'[ "$STORLAB_X" = b ] || read line < {fifo}; '
                        'echo "$MY_API_TOKEN $F18_PASSED"; echo result v=1'],
            "regex_metrics": [r"result v=(?P<v>\d+)"],
            "env": {"MY_API_TOKEN": SECRET}}}}))
    proc = storlab_forked.start("run", str(d / "campaign.yaml"),
                                env={**os.environ, "F18_PASSED": PASSED,
                                     "STORLAB_ENV_PASS": "F18_PASSED"})
    try:
        deadline, seen = time.monotonic() + 60, None
        while time.monotonic() < deadline and proc.poll() is None:
            lines = _cmdlines()
            # the program is running (blocked on the FIFO) once a shell reading it shows
            if any(b"read line < " + os.fsencode(fifo) in c for c in lines.values()):
                seen = lines
                break
            time.sleep(0.05)
        assert seen is not None, "the program never started"
        bwraps = [c.split(b"\0") for c in seen.values() if b"--args" in c.split(b"\0")]
        assert bwraps, "no bwrap reading its options from a descriptor"
        assert all(c[1] == b"--args" and c[3] == b"--" for c in bwraps), bwraps
        leaked = [c for c in seen.values() if SECRET.encode() in c or PASSED.encode() in c]
        assert leaked == []
        with open(fifo, "w") as f:  # the program goes on
            f.write("go\n")
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    out = (d / "campaign.db.output" / "c1-r1.stdout").read_text()
    assert f"{SECRET} {PASSED}" in out  # both reached the program, inside
