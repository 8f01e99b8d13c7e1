"""A full disk during `storlab run`: one line, exit 2, the store intact, and the campaign
resumes once there is space again. On a real small tmpfs (mounted here; skipped when this
process may not mount)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

pytestmark = pytest.mark.xdist_group("lock")

# A "benchmark" that, for fill=1, writes into the campaign's directory `fill` (declared
# writable for its sandbox) until the disk is full (unless the file `enough` is there).
FILLER = r"""
import json, os, sys
if sys.argv[2] == "1" and not os.path.exists(os.path.join(sys.argv[1], "enough")):
    with open(os.path.join(sys.argv[1], "fill", "filler.bin"), "ab") as fh:
        try:
            while True:
                fh.write(b"x" * 65536)
                fh.flush()
        except OSError:
            pass
print(json.dumps({"y": 1}))
""".replace("{", "{{").replace("}", "}}")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / f"mnt-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root/CAP_SYS_ADMIN): {p.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def campaign(d: Path) -> Path:
    (d / "fill").mkdir(parents=True, exist_ok=True)
    spec: dict[str, Any] = {
        "name": "full", "seed": 1, "timeout": 60, "randomize": False,
        "space": {"factors": [{"name": "fill", "kind": "categorical", "values": ["0", "1"]},
                              {"name": "n", "kind": "categorical", "values": ["a", "b"]}]},
        "design": {"kind": "full"},
        "runner": {"type": "command",
                   "options": {"command": [sys.executable, "-c", FILLER, str(d), "{fill}"],
                               "json_metrics": {"y": "y"}}},
        "repetitions": 1,
        "sandbox": {"writable": ["fill"]},
    }
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def test_full_disk_is_one_line_and_the_campaign_resumes(small_fs: Path, storlab: Any) -> None:
    d = small_fs / "c"
    camp = campaign(d)
    p = storlab("run", camp, "-q", timeout=120)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert "Traceback" not in p.stderr and len(lines) == 1, p.stderr
    assert "database or disk is full" in lines[0] and "campaign.db" in lines[0]
    assert "run the same command to resume" in lines[0]
    # the disk really was full: closing the store afterwards removes SQLite's write-ahead
    # log, so at most its few blocks (~92 KiB here) are free again by now
    assert os.statvfs(small_fs).f_bavail * os.statvfs(small_fs).f_frsize <= 128 * 1024
    con = sqlite3.connect(d / "campaign.db")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    before = list(con.execute("SELECT key, status, config FROM runs ORDER BY seq"))
    con.close()
    # the runs before the write that found the disk full are kept; the run it was for is
    # still `running` (its result could not be stored), or, when the filling run's result
    # was stored and the next run's start was not, every stored run is `ok`
    statuses = [s for _, s, _ in before]
    assert statuses in (["ok"] * len(before), ["ok"] * (len(before) - 1) + ["running"]), before
    assert any('"fill": "1"' in c for _, _, c in before) and len(before) < 4
    cut = {k for k, s, _ in before if s == "running"}
    (d / "fill" / "filler.bin").unlink()  # space again
    (d / "enough").touch()  # and the resumed run does not fill the disk anew
    r = storlab("run", camp, "-q", timeout=120)
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(d / "campaign.db")
    after = dict(con.execute("SELECT key, status FROM runs"))
    attempts = dict(con.execute("SELECT key, attempts FROM runs"))
    con.close()
    assert after == {f"c{i}-r1": "ok" for i in range(1, 5)}
    assert attempts == {f"c{i}-r1": 2 if f"c{i}-r1" in cut else 1 for i in range(1, 5)}
