"""fio `opendir:` over a tree 1200 levels deep: refused in one line (the check walks
with an explicit stack, bounded), never a RecursionError traceback (real CLI)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed"),
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.xdist_group("fio")]


@pytest.fixture(autouse=True)
def _rm_deep(tmp_path: Path) -> Any:
    """Remove the deep tree after the test: pytest's own clean-up of old temporary
    directories (shutil.rmtree, recursive in Python 3.11) fails on 1200 levels."""
    yield
    subprocess.run(["rm", "-rf", str(tmp_path / "c")], check=False)


def test_a_deep_opendir_tree_is_one_line(tmp_path: Path, storlab: Any) -> None:
    camp = tmp_path / "c"
    camp.mkdir()
    old = os.getcwd()
    (camp / "data").mkdir()
    os.chdir(camp / "data")
    try:
        for _ in range(1200):
            os.mkdir("d")
            os.chdir("d")
        Path("f").write_bytes(b"x")
    finally:
        os.chdir(old)
    spec = {"name": "o", "timeout": 30, "space": {"factors": [
                {"name": "bs", "kind": "categorical", "values": ["4k", "8k"]}],
                "responses": [{"name": "write_iops", "goal": "maximize"}]},
            "design": {"configs": [{"bs": "4k"}]},
            "runner": {"type": "fio", "options": {"opendir": "../../data", "rw": "read",
                                                  "size": "4k"}}}
    (camp / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    r = storlab("run", str(camp / "campaign.yaml"), timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stdout + r.stderr
    assert "too deep" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_files_false_checks_no_file() -> None:
    """`files=False` (the run-time pass) is not overwritten by the walk's iterator."""
    from storlab.campaign.runners.fio_targets import Candidate, check_candidate

    c = Candidate("/etc", False, "/etc", opendir=True, relative=False, dirs=())
    check_candidate(c, Path("/tmp/nowhere"), remote=False, files=False)
    with pytest.raises(Exception, match="outside"):
        check_candidate(c, Path("/tmp/nowhere"), remote=False, files=True)


def test_a_deep_opendir_tree_made_by_a_setup_step_fails_the_run_in_one_line(
        tmp_path: Path, storlab: Any) -> None:
    import sys

    camp = tmp_path / "c"
    camp.mkdir()
    make = ("import os\nos.mkdir('t'); os.chdir('t')\nfor _ in range(1200):\n"
            "    os.mkdir('d'); os.chdir('d')\nopen('f', 'w').write('x')\n")
    spec = {"name": "o", "timeout": 30, "space": {"factors": [
                {"name": "bs", "kind": "categorical", "values": ["4k", "8k"]}],
                "responses": [{"name": "read_iops", "goal": "maximize"}]},
            "design": {"configs": [{"bs": "4k"}]},
            "setup": [{"run": [sys.executable, "-c", make]}],
            "runner": {"type": "fio", "options": {"opendir": "t", "rw": "read",
                                                  "size": "4k"}}}
    (camp / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    r = storlab("run", str(camp / "campaign.yaml"), timeout=120)
    out = r.stdout + r.stderr
    assert "Traceback" not in out and "RecursionError" not in out, out
    assert "c1-r1 failed" in out and "too deep" in out, out
