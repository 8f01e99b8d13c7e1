"""The installed `storlab` console script (what a user runs after `make` or `pip install`):
usage errors are one line (click's message, then the usage line) and exit 2, never a
traceback or typer's multi-line box.

Recent typer releases vendor their own copy of click with its own exception classes; a CLI
that caught `click.ClickException` itself crashed on them (issue 12). The script is run as
installed, from the venv of the interpreter running the tests, against the locked typer.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(sys.executable).parent / "storlab"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.exists(), f"{SCRIPT}: the console script is not installed (make venv)"
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


@pytest.mark.parametrize("args,says", [
    (["analyze", "x.csv"], "--response"),                 # a required option missing
    (["analyze", "x.csv", "-y", "r", "--bogus"], "--bogus"),  # an unknown option
    (["design", "--runs", "abc"], "--runs"),              # a value of the wrong type
    (["nosuchcmd"], "nosuchcmd"),                         # an unknown command
    (["estimate", "nosuch"], "nosuch"),                   # ... of a command group
    (["estimate", "predict", "--read-pct", "50"], "--model"),
    (["design", "--factors"], "--factors"),               # an option without its value
])
def test_usage_errors_exit_2_with_usage(args: list[str], says: str, tmp_path: Path) -> None:
    (tmp_path / "x.csv").write_text("a,r\n1,2\n")
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    # click's message on storlab's one error line, then the usage when click knows it
    assert r.stderr.startswith("storlab: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert says in r.stderr, r.stderr
    assert "Usage: storlab" in r.stderr or args == ["design", "--factors"], r.stderr
    assert r.stdout == ""
    assert [p.name for p in tmp_path.iterdir()] == ["x.csv"]


def test_storlab_error_is_one_line(tmp_path: Path) -> None:
    r = run("analyze", "missing.csv", "-y", "r", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip() == "storlab: error: missing.csv: file not found"


def test_help_and_success_exit_0(tmp_path: Path) -> None:
    r = run("--help")
    assert r.returncode == 0 and "design" in r.stdout and "analyze" in r.stdout
    r = run("design", "--factors", "3", "--kind", "full", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert '"runs": 8' in r.stdout


def test_usage_errors_with_an_older_typer(tmp_path: Path, storlab: Any) -> None:
    """typer 0.15 raises click's own exceptions (typer 0.29, the locked one, raises its
    vendored copies): both must give the one-line usage error and exit 2."""
    lib = tmp_path / "lib"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                          "--target", str(lib), "typer==0.15.1", "click==8.1.8"],
                         capture_output=True, text=True, timeout=300)
    if pip.returncode != 0:
        pytest.skip(f"cannot install typer 0.15.1 (no package index?): {pip.stderr[-300:]}")
    env = {**__import__("os").environ, "PYTHONPATH": str(lib)}
    probe = subprocess.run([sys.executable, "-c", "import typer; print(typer.__version__)"],
                           capture_output=True, text=True, env=env)
    assert probe.stdout.strip() == "0.15.1"
    for args, says in ((["design", "--runs", "abc"], "--runs"), (["nosuchcmd"], "nosuchcmd"),
                       (["analyze", "r.csv"], "--response")):
        (tmp_path / "r.csv").write_text("a,r\n1,2\n")
        r = storlab(*args, env={"PYTHONPATH": str(lib)}, cwd=tmp_path, timeout=120)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.startswith("storlab: error: ") and r.stderr.count("\n") == 1
        assert "Usage: storlab" in r.stderr and says in r.stderr, r.stderr
    r = storlab("design", "--factors", "3", "--runs", "0", env={"PYTHONPATH": str(lib)},
                timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == \
        "storlab: error: --runs 0: must be between 1 and 1000000"
