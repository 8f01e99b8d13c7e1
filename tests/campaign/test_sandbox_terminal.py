"""A run's program cannot type into a terminal: it starts in a session of its own (bwrap's
`--new-session` on top of storlab's own session and /dev/null for stdin), and the
seccomp filter refuses `ioctl` TIOCSTI (push bytes into a terminal's input, which the
shell reading it runs) and TIOCLINUX (paste a console's selection into it) whatever the
descriptor. Checked for real: `storlab run` started on a pty (its controlling terminal,
as an operator's ssh session), the program tries both on the caller's terminal and on a
pty of its own (the controlling terminal of its child, where only the filter refuses)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.skipif(not os.path.exists("/usr/bin/python3"),
                                 reason="the program is the system's python3")]


def test_a_run_program_cannot_type_into_a_terminal(
        tmp_path: Path, command_campaign: Callable[..., Path], storlab_argv: list[str],
        terminal_probe: str, under_a_pty: Callable[..., tuple[int, str]]) -> None:
    camp = command_campaign(tmp_path / "c", ["/usr/bin/python3", "-c", terminal_probe])
    status, seen = under_a_pty([*storlab_argv, "run", str(camp)], cwd=camp.parent)
    assert status == 0, seen[-3000:]
    outs = list((camp.parent / "campaign.db.output").glob("*.stdout"))
    assert len(outs) == 1, (outs, seen[-3000:])
    lines = [ln for ln in outs[0].read_text().splitlines() if ln.startswith("{")]
    assert lines, outs[0].with_suffix(".stderr").read_text()
    got = json.loads(lines[-1])["got"]
    # the caller's terminal: not its stdin, not its controlling terminal
    assert got["tty0"] is False and got["sti0"] != "ok" and got["devtty"] == "ENXIO", got
    # its session's leader is inside the sandbox (bwrap's --new-session), not a process
    # outside that the sandbox does not see (0)
    assert got["sid"] != 0, got
    # the filter: TIOCSTI, TIOCLINUX refused on the program's own terminal; another
    # terminal request allowed
    assert got["own"] == ["EPERM", "EPERM", "ok"], got
