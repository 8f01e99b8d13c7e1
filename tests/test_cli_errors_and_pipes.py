"""What a user sees at the edges of every command (issue 15): output cut short by its
reader (`storlab ... | head`) is no error (exit 0, nothing on stderr)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from storlab.cli import main

SCRIPT = Path(sys.executable).parent / "storlab"


def _command_paths() -> list[str]:
    import typer.main

    from storlab.cli import app

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                yield from walk(sub, (*path, name))
        else:
            yield " ".join(path)

    return list(walk(typer.main.get_command(app), ()))


def _in_process(args: list[str], capsys) -> tuple[int, str, str]:
    """`storlab ARGS` through the real entry point, in this process (21 subprocesses would
    cost ~10 s of start-up)."""
    with pytest.raises(SystemExit) as exit_:
        main(args)
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


def _closed_reader(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    """Run `argv` writing into a pipe whose reader is already gone: every write fails with
    EPIPE, as after `| head` has read its lines (deterministic, unlike a real head)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(argv, stdout=w, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(w)
    return p


@pytest.mark.parametrize("args", [
    ["--help"],                                                             # rich help
    ["design", "--factors", "3", "--kind", "full"],                         # rich tables
    ["design", "--factors", "12", "--kind", "lhs", "--runs", "3000", "--json"],  # print()
])
def test_output_into_a_closed_pipe_exits_0_silently(args, storlab_argv, tmp_path):
    for argv in (storlab_argv, [str(SCRIPT)]):  # the checkout and the installed script
        p = _closed_reader([*argv, *args])
        assert p.returncode == 0 and p.stderr == b"", (argv, p.returncode, p.stderr[-800:])


@pytest.mark.parametrize("args", ["--help", "design --factors 12 --kind lhs --runs 3000 --json"])
def test_piped_into_head(args):
    """The user's own pipeline; pipefail makes its status storlab's."""
    head = subprocess.run(["bash", "-c", f"set -o pipefail; {SCRIPT} {args} | head -1"],
                          capture_output=True, text=True, timeout=120)
    assert head.returncode == 0 and head.stderr == "", head
    assert len(head.stdout.splitlines()) == 1


def test_stdout_at_dev_null_keeps_the_exit_status(storlab_argv):
    """The broken-pipe rule must not hide a real failure when stdout is /dev/null."""
    with open(os.devnull, "w") as devnull:
        p = subprocess.run([*storlab_argv, "analyze", "/nonexistent.csv", "-y", "r"],
                           stdout=devnull, stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.startswith("storlab: error: ")
