"""A store a campaign ships (storlab's schema and id, so its schema passes) with one stored
JSON value of another shape than storlab writes: `storlab run`, `status` and `results`
refuse it in one line naming the store, the row and the column (`storlab: error: FILE:
...`, exit 2), never a traceback. Each store here is made by a real `storlab run`, then
one value is changed with sqlite3, as the campaign's author could."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory, storlab_argv: list[str],
         integer_campaign: Callable[..., Path]) -> dict[str, Path]:
    """A full design's and a tuning campaign's stores, each made once by `storlab run`."""
    import subprocess

    out = {}
    for name, design in (("full", {"kind": "full"}),
                         ("tune", {"kind": "tune", "budget": 6, "strategy": "random",
                                   "objectives": [{"y": "maximize"}]})):
        p = integer_campaign(tmp_path_factory.mktemp(name), design, factors=2,
                             responses=[{"name": "y"}], name="shape")
        r = subprocess.run([*storlab_argv, "run", str(p)], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        out[name] = p.parent / "campaign.db"
    return out


# (store, table, column, the row's WHERE, the value, what the refusal names)
CASES = [
    ("full", "runs", "metrics", "key='c1-r1'", "nojson",
     "runs c1-r1: column metrics is not JSON"),
    ("full", "runs", "metrics", "key='c1-r1'", "[1]",
     "runs c1-r1: column metrics is a JSON list, not an object"),
    ("full", "runs", "metrics", "key='c1-r1'", '{"y": "1"}',
     "runs c1-r1: column metrics holds 'y': a JSON string, not a number"),
    ("full", "runs", "metrics", "key='c1-r1'", '{"y": true}',
     "runs c1-r1: column metrics holds 'y': a JSON boolean, not a number"),
    ("full", "runs", "rows", "key='c1-r1'", '{"a": 1}',
     "runs c1-r1: column rows is a JSON object, not a list"),
    ("full", "runs", "rows", "key='c1-r1'", "[1]",
     "runs c1-r1: column rows item 0 is a JSON number"),
    ("full", "runs", "config", "key='c1-r1'", "7",
     "runs c1-r1: column config is a JSON number, not an object"),
    ("full", "runs", "config", "key='c1-r1'", '{"x0": {"a": 1}}',
     "runs c1-r1: column config holds 'x0': a JSON object"),
    ("full", "configs", "config", "config_id=1", "[1]",
     "configs 1: column config is a JSON list, not an object"),
    ("full", "configs", "design", "config_id=1", "7",
     "configs 1: column design is a JSON number, not an object"),
    ("full", "meta", "value", "key='measurement'", "[]",
     "meta measurement: column value is a JSON list, not an object"),
    ("tune", "meta", "value", "key='design'", "nojson",
     "meta design: column value is not JSON"),
    ("tune", "meta", "value", "key='design'", '{"kind": "tune", "objectives": 5}',
     "meta design: objectives is not a list"),
    ("tune", "plan", "note", "seq=(SELECT MIN(seq) FROM plan)", "[]",
     "column note is a JSON list, not an object"),
    ("tune", "meta", "value", "key='source'", "3",
     "meta source: column value is a JSON number, not an object"),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[1]}.{c[2]}={c[4]}" for c in CASES])
def test_a_shipped_store_value_of_another_shape_is_one_line(
        made: dict[str, Path], tmp_path: Path, storlab, case: tuple[str, ...]) -> None:
    kind, table, column, where, value, names = case
    d = tmp_path / "c"
    shutil.copytree(made[kind].parent, d)
    db = d / "campaign.db"
    with sqlite3.connect(db) as con:
        assert con.execute(f"UPDATE {table} SET {column}=? WHERE {where}",
                           (value,)).rowcount == 1
    con.close()
    refused = 0
    for cmd in ("run", "status", "results"):
        r = storlab(cmd, str(d / "campaign.yaml"))
        assert "Traceback" not in r.stdout + r.stderr, (cmd, r.stderr)
        if r.returncode == 0:  # this command does not read that value
            continue
        assert r.returncode == 2, (cmd, r)
        # `run` may say what it found first (its progress line): the refusal is one line
        errors = [ln for ln in r.stderr.splitlines() if "error" in ln]
        assert errors == [r.stderr.splitlines()[-1]], (cmd, r.stderr)
        assert errors[0].startswith(f"storlab: error: {db}: ") and names in errors[0], errors
        refused += 1
    # run and results read every run and configuration; the meta and plan values are
    # read by the commands that need them
    assert refused >= (1 if table in ("meta", "plan") else 2), case
