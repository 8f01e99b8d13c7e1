"""What a user sees at the edges of every command (issue 15): a usage error is one line and
exit 2 (no box, no traceback), and output cut short by its reader (`storlab ... | head`)
is no error (exit 0, nothing on stderr)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("command", _command_paths())
def test_every_command_gives_a_usage_error_on_one_line(command, storlab_main):
    code, out, err = storlab_main(*command.split(), "--no-such-option")
    assert code == 2 and out == ""
    assert err.count("\n") == 1, err
    assert err.startswith("storlab: error: No such option: --no-such-option"), err
    assert f"(Usage: storlab {command} [OPTIONS]" in err, err
    assert "╭" not in err and "Traceback" not in err


@pytest.mark.parametrize("args,says", [
    (["analyze"], "Missing argument 'results'."),                      # missing argument
    (["analyze", "x.csv"], "Missing option '--response'"),             # missing option
    (["design", "--runs", "abc"], "Invalid value for '--runs' / '-n'"),  # bad int
    # a bad choice (storlab checks choices itself, naming them)
    (["design", "--factors", "3", "--kind", "bogus"], "design kind 'bogus' must be one of"),
    (["nosuchcmd"], "No such command 'nosuchcmd'."),                   # unknown command
    (["estimate", "nosuch"], "No such command 'nosuch'."),
    (["design", "--factors"], "Option '--factors' requires an argument."),
    (["analyze", "x.csv", "-y", "r", "extra"], "Got unexpected extra argument(s) (extra)"),
])
def test_usage_errors_are_one_line(args, says, storlab_main, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.csv").write_text("a,r\n1,2\n")
    code, out, err = storlab_main(*args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"storlab: error: {says}"), err


def test_no_arguments_still_prints_the_help(storlab_main):
    code, out, err = storlab_main()
    assert code == 2 and "Usage: storlab [OPTIONS] COMMAND" in out and err == ""


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
