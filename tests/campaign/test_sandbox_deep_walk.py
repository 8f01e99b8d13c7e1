"""The walk for sockets and hard links in the declared writable directories, against a
tree deeper than the kernel's PATH_MAX (4096 bytes): a hard link to a file outside placed
there is covered or the run refused, never skipped (real CLI, real bwrap)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.xdist_group("fio")]

WRITE = """import os, sys
os.chdir(sys.argv[1])
for _ in range(int(sys.argv[2])):
    os.chdir('d' * 100)
try:
    with open('v', 'a') as f:
        f.write('PWNED\\n')
except OSError as e:
    print(e)
print('{"y": 1}')
"""


def _deep(top: Path, levels: int) -> str:
    """`levels` nested directories of 100-character names under `top` (made relative to
    the current one: the full path passes PATH_MAX); returns the cwd to restore."""
    old = os.getcwd()
    top.mkdir()
    os.chdir(top)
    for _ in range(levels):
        os.mkdir("d" * 100)
        os.chdir("d" * 100)
    return old


@pytest.mark.parametrize("levels", [3, 45])
def test_a_deep_hard_link_in_a_writable_dir_is_covered_or_refused(
        tmp_path: Path, storlab: Any, levels: int) -> None:
    camp = tmp_path / "c"
    camp.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("ORIGINAL\n")
    old = _deep(camp / "data", levels)
    try:
        os.link(victim, "v")
    finally:
        os.chdir(old)
    (camp / "w.py").write_text(WRITE)
    spec = {"name": "h", "timeout": 30, "space": {
                "factors": [{"name": "n", "kind": "categorical", "values": ["a", "b"]}],
                "responses": [{"name": "y", "goal": "maximize"}]},
            "design": {"configs": [{"n": "a"}]}, "sandbox": {"writable": ["data"]},
            "runner": {"type": "command", "options": {
                "command": [sys.executable, str(camp / "w.py"), str(camp / "data"),
                            str(levels)], "json_metrics": {"y": "y"}}}}
    (camp / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    r = storlab("run", str(camp / "campaign.yaml"), timeout=120)
    assert victim.read_text() == "ORIGINAL\n", r.stdout + r.stderr
    if levels > 40:  # too long to cover: the run refused, in one line naming it
        out = r.stdout + r.stderr
        assert "cannot cover" in out and "too long" in out, out
    assert "Traceback" not in r.stdout + r.stderr


def test_an_unlistable_directory_refuses_the_run(tmp_path: Path) -> None:
    """A directory the walk can enter but not list is not skipped: the run is refused."""
    from storlab.errors import CampaignError
    from storlab.campaign.runners._sandbox import _specials

    if os.geteuid() == 0:
        pytest.skip("root lists a 0311 directory")
    d = tmp_path / "w" / "hidden"
    d.mkdir(parents=True)
    d.chmod(0o311)
    try:
        with pytest.raises(CampaignError, match="cannot walk .*hidden"):
            _specials(str(tmp_path / "w"), True)
    finally:
        d.chmod(0o755)
