"""Program-made trees storlab removes (a run's directory, the directory a question to a
program runs in) and files a campaign names that storlab reads or refuses: routes an
attacker found, each with the real CLI, real bwrap and real programs."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed")]

#: Makes `depth` nested directories in its working directory (Python 3.11's
#: shutil.rmtree recurses once per level: the recursion limit is 1000).
NEST = "import os\nfor _ in range({depth}):\n    os.mkdir('d')\n    os.chdir('d')\n"


@pytest.fixture(autouse=True)
def _no_deep_tree_left(tmp_path: Path) -> Any:
    """pytest's own removal of old temporary directories recurses too (shutil.rmtree):
    the deep trees a test leaves in its campaign are removed with GNU rm as it ends."""
    yield
    subprocess.run(["rm", "-rf", "--one-file-system", str(tmp_path / "c")], check=False)


def write(d: Path, runner: dict[str, Any], factor: dict[str, Any] | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "deep", "timeout": 60, "space": {
                "factors": [factor or {"name": "n", "kind": "categorical",
                                       "values": ["a", "b"]}],
                "responses": [{"name": "y", "goal": "maximize"}]},
            "design": {"configs": [{(factor or {"name": "n"})["name"]:
                                    (factor or {"values": ["a"]})["values"][0]}]},
            "runner": runner}
    (d / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return d / "campaign.yaml"


def runs(store: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(store) as db:
        return [(s, t or "") for s, t in db.execute("SELECT status, stderr_tail FROM runs")]


def test_a_deep_tree_in_a_run_directory_is_removed(tmp_path: Path, storlab: Any) -> None:
    """A command making 3000 nested directories in its run directory: the run's directory
    is removed after an ok run; after a failed one it stays, and `--retry-failed` clears
    it (the clearing raised RecursionError: a traceback recorded, the run failed for
    good) and runs again."""
    camp = tmp_path / "c"
    code = NEST.format(depth=3000) + (
        "import sys\nif not os.path.exists(sys.argv[1]):\n    sys.exit(1)\n"
        "print('{\"y\": 1}')\n")
    camp.mkdir()
    (camp / "nest.py").write_text(code)
    path = write(camp, {"type": "command", "options": {
        "command": [sys.executable, str(camp / "nest.py"), str(camp / "go")],
        "json_metrics": {"y": "y"}}})
    r = storlab("run", str(path), timeout=180)
    # its one run failed (on purpose): exit 1
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert [s for s, _ in runs(camp / "campaign.db")] == ["failed"]
    assert (camp / "scratch" / "c1-r1" / "d" / "d").is_dir()
    (camp / "go").write_text("")
    r = storlab("run", "--retry-failed", str(path), timeout=180)
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    got = runs(camp / "campaign.db")
    assert [s for s, _ in got] == ["ok"], got
    assert not any("Recursion" in t or "Traceback" in t for _, t in got), got
    assert not (camp / "scratch" / "c1-r1").exists()


@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="no system python3")
def test_a_program_asked_before_the_runs_leaves_no_tree(tmp_path: Path, storlab: Any) -> None:
    """A `fio:` program storlab asks before any run (`--version`, `--parse-only`) that
    makes 1500 nested directories where it runs: storlab used to exit 1 with a
    RecursionError traceback from the temporary directory's cleanup, leaving the tree in
    the system's temporary directory. Now the campaign runs (fails: no fio document) and
    nothing is left."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    camp = tmp_path / "c"
    camp.mkdir()
    fake = camp / "fakefio"
    fake.write_text("#!/usr/bin/python3\n" + NEST.format(depth=1500) + "print('fio-3.33')\n")
    fake.chmod(0o755)
    (camp / "data").mkdir()
    path = write(camp, {"type": "fio", "options": {
        "fio": str(fake), "ioengine": "psync", "rw": "write", "size": "4k",
        "directory": "data"}}, {"name": "bs", "kind": "categorical", "values": ["4k", "8k"]})
    r = storlab("run", str(path), timeout=180, env={"TMPDIR": str(tmp)})
    # the one run fails (no fio document): exit 1, no traceback
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert "ran 1" in r.stdout, r.stdout
    assert list(tmp.iterdir()) == []


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_a_socket_target_is_named_as_a_socket(tmp_path: Path, storlab: Any) -> None:
    """fio `filename:` naming a Unix socket outside the scratch area is refused in one
    line that says what it is (it said "a block device")."""
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "daemon.sock"))
    try:
        path = write(tmp_path / "c", {"type": "fio", "options": {
            "filename": str(tmp_path / "daemon.sock"), "rw": "write", "size": "4k"}},
            {"name": "bs", "kind": "categorical", "values": ["4k", "8k"]})
        r = storlab("run", str(path), timeout=120)
    finally:
        s.close()
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "is a Unix socket" in r.stderr and "block device" not in r.stderr, r.stderr


def test_a_job_file_linked_out_of_the_campaign_is_not_read(tmp_path: Path,
                                                           storlab: Any) -> None:
    """`job_file:` that is a link in the campaign's directory to a root-only file: the
    parse error echoed the file's first line. A job file that leads outside the campaign's
    directory is refused in one line, nothing of it shown; one inside (a link within the
    campaign's directory too) is read as before."""
    secret = tmp_path / "root-only"
    secret.write_text("TOPSECRET-first-line\n")
    secret.chmod(0o600)
    camp = tmp_path / "c"
    camp.mkdir()
    (camp / "job.fio").symlink_to(secret)
    runner = {"type": "fio", "options": {"job_file": "job.fio", "rw": "write",
                                         "size": "4k", "directory": "data"}}
    factor = {"name": "bs", "kind": "categorical", "values": ["4k", "8k"]}
    r = storlab("run", str(write(camp, runner, factor)), timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "TOPSECRET" not in r.stdout + r.stderr and "leads outside" in r.stderr, r.stderr
    (camp / "job.fio").unlink()
    (camp / "real.fio").write_text("not-a-section-line\n")
    (camp / "job.fio").symlink_to(camp / "real.fio")
    r = storlab("run", str(write(camp, runner, factor)), timeout=120)
    assert r.returncode == 2 and "not-a-section-line" in r.stderr, r.stderr


def test_remove_tree_removes_a_file_and_a_link_not_what_it_leads_to(tmp_path: Path) -> None:
    """`remove_tree` says "or a file": rmtree with errors ignored left a file in place. A
    file and a link are unlinked (the link's target kept); a deep tree goes too."""
    from storlab.fileio import remove_tree

    (tmp_path / "f").write_text("x")
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "keep").write_text("theirs")
    (tmp_path / "lnk").symlink_to(tmp_path / "target")
    d = tmp_path / "tree"
    (d / "a" / "b").mkdir(parents=True)
    (d / "a" / "b" / "g").write_text("y")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in ("f", "lnk", "tree"):
            remove_tree(name, fd)
    finally:
        os.close(fd)
    assert sorted(os.listdir(tmp_path)) == ["target"]
    assert (tmp_path / "target" / "keep").read_text() == "theirs"
