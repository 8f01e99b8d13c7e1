"""Readers open the store read-only (`Store(path, readonly=True)`, SQLite `mode=ro`): reading
never creates a store, never migrates an older one, and works on a read-only copy."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.campaign import Campaign
from storlab.campaign.store import SCHEMA, Store
from storlab.errors import CampaignError

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

PRINT_Y = [sys.executable, "-c", "import json; print(json.dumps({'y': 1.0}))"]
NOBODY = 65534


def campaign(d: Path) -> Path:
    spec = {"name": "ro", "seed": 3, "randomize": False,
            "space": {"factors": [{"name": f"x{i}", "kind": "integer", "range": [1, 2]}
                                  for i in range(2)]},
            "design": {"kind": "full"},
            "runner": {"type": "command", "options": {"command": PRINT_Y,
                                                      "json_metrics": {"y": "y"}}}}
    d.mkdir(parents=True, exist_ok=True)
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    """A finished 4-run campaign (a command that prints y)."""
    camp = Campaign.load(campaign(tmp_path_factory.mktemp("done") / "c"))
    assert camp.run().ok == 4
    return camp


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A directory the unprivileged user can reach (pytest's tmp dirs are 0700)."""
    d = Path(tempfile.mkdtemp(prefix="storlab-ro-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        for p in [d, *d.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(d)


def as_reader() -> list[str]:
    """Root ignores file modes: run the reader as `nobody` so the modes are real."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file modes cannot be enforced")
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def test_a_read_only_copy_is_reported_without_a_byte_changed(
        done: Campaign, world_dir: Path, storlab_argv: list[str]) -> None:
    copy = world_dir / "copy"
    shutil.copytree(done.path.parent, copy)
    store = copy / done.store_path.relative_to(done.path.parent)
    before = digest(store)
    for p in sorted(copy.rglob("*"), reverse=True):
        p.chmod(0o555 if p.is_dir() else 0o444)
    copy.chmod(0o555)
    listing = sorted(str(p) for p in copy.rglob("*"))
    out = world_dir / "out"
    out.mkdir(mode=0o777)
    out.chmod(0o777)
    env = {**os.environ, "MPLCONFIGDIR": str(out / "mpl"), "HOME": str(out)}
    prefix = as_reader() + storlab_argv
    r = subprocess.run(prefix + ["report", str(copy / "campaign.yaml"), "-o",
                                           str(out / "report.html")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    html = (out / "report.html").read_text()
    assert "Campaign report: ro" in html and "x0" in html
    for cmd in (["results", str(copy / "campaign.yaml")], ["status", str(copy / "campaign.yaml")]):
        r = subprocess.run(prefix + cmd, capture_output=True, text=True, env=env,
                           timeout=60)
        assert r.returncode == 0, r.stderr
    assert digest(store) == before
    assert sorted(str(p) for p in copy.rglob("*")) == listing  # no store, -wal or -shm made


def test_a_missing_store_is_an_error_not_a_new_file(tmp_path: Path, storlab: Any) -> None:
    path = tmp_path / "none" / "store.sqlite"
    with pytest.raises(CampaignError, match="no campaign store"):
        Store(path, readonly=True)
    assert not path.exists() and not path.parent.exists()

    camp = Campaign.load(campaign(tmp_path / "fresh"))
    r = storlab("results", camp.path, timeout=60)
    assert r.returncode != 0 and "no store yet" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr  # one line, no traceback
    assert not camp.store_path.exists()
    assert camp.status()["status"].tolist() == ["pending"] and not camp.store_path.exists()


def test_an_older_store_is_read_without_migrating_it(done: Campaign, tmp_path: Path) -> None:
    old = tmp_path / "old.sqlite"
    # as a store written before the `owner` column and the plan table
    schema = re.sub(r"(rows\s+TEXT),([^\n]*)\n\s*owner[^\n]*", r"\1\2", SCHEMA)
    assert "owner" not in schema
    con = sqlite3.connect(old)
    con.executescript(schema)
    con.execute("ATTACH DATABASE ? AS new", (str(done.store_path),))
    cols = [r[1] for r in con.execute("PRAGMA main.table_info(runs)")]
    for table, names in (("meta", "*"), ("configs", "*"), ("runs", ", ".join(cols))):
        con.execute(f"INSERT INTO main.{table} SELECT {names} FROM new.{table}")
    con.commit()
    con.execute("DETACH DATABASE new")
    con.close()
    before = digest(old)
    with Store(old, readonly=True) as st:
        assert len(st.runs()) == 4 and st.plan_rows() == [] and len(st.configs()) == 4
    assert digest(old) == before
    con = sqlite3.connect(old)
    assert "owner" not in {r[1] for r in con.execute("PRAGMA table_info(runs)")}
    con.close()
    with Store(old) as st:  # the writer still migrates it
        assert "owner" in {r[1] for r in st.db.execute("PRAGMA table_info(runs)")}


def test_a_read_only_store_refuses_to_write(done: Campaign) -> None:
    with Store(done.store_path, readonly=True) as st:
        with pytest.raises(CampaignError, match="read-only"):
            with st.writer_lock():
                pass
        with pytest.raises(CampaignError, match="cannot write"):
            st.set_meta("x", "y")


def test_a_file_that_is_not_a_store_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not a database\n" * 100)
    with pytest.raises(CampaignError, match="not a usable campaign store"):
        Store(bad, readonly=True)
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    with pytest.raises(CampaignError, match="not a campaign store"):
        Store(empty, readonly=True)
