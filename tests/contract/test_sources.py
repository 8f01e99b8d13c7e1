"""The design-source contract, checked over every source a campaign draws configurations
from (fixed designs of each kind, a CSV, a literal list, the adaptive tuner), the way
scikit-learn's `check_estimator` checks every estimator:

- shape: every configuration gives every factor a value of the space, and the campaign's
  results tables have the same columns and types whatever the source;
- a bad option is refused when the campaign is loaded, with one line (a StorlabError)
  naming the campaign file, before any store or run exists;
- deterministic for a seed: the same file gives the same configurations in the same order
  (an adaptive source: the same proposals given the same results), another seed another
  sample where the source samples;
- the store keeps the source's metadata (kind ...), which readers take from there.

Runs are a tiny deterministic command (a Python one-liner), so each source takes seconds."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from storlab.campaign.campaign import Campaign
from storlab.campaign.store import Store
from storlab.design import KINDS
from storlab.errors import StorlabError

FACTORS = [{"name": "a", "kind": "integer", "range": [1, 4]},
           {"name": "b", "kind": "real", "range": [0.0, 1.0]},
           {"name": "c", "kind": "categorical", "values": ["x", "y"]},
           {"name": "d", "kind": "ordinal", "values": [1, 2]}]
# y depends on every factor, so that a tuner has something to find
PROGRAM = ("import json,sys; a,b,c,d=sys.argv[1:]; "
           "print(json.dumps({{'y': int(a)+float(b)+(c=='y')+int(d)}}))")
RUN_COLUMNS = ["config_id", "repetition", "a", "b", "c", "d", "status", "exit_code",
               "started", "ended", "host", "y"]
#: A source's own bookkeeping, carried into the tables next to the factors.
BOOKKEEPING = {"std_order", "replicate", "block", "center", "phase"}


@dataclass
class Source:
    name: str
    design: dict[str, Any]
    bad: dict[str, Any]         # a bad option of this source
    names: str                  # a word the one-line error must hold
    files: dict[str, str] = field(default_factory=dict)
    samples: bool = False       # another seed gives other configurations
    kind: str = ""              # the design kind the store records


CSV = "a,b,c,d\n1,0.5,x,1\n4,0.25,y,2\n2,1.0,x,2\n"
SOURCES = [
    Source("full", {"kind": "full"}, {"kind": "full", "center": -1}, "center", kind="full"),
    Source("fractional", {"kind": "fractional", "runs": 8},
           {"kind": "fractional", "runs": 8, "resolution": 9}, "resolution",
           kind="fractional"),
    Source("pb", {"kind": "pb", "runs": 8}, {"kind": "pb", "runs": 7}, "7", kind="pb"),
    Source("lhs", {"kind": "lhs", "runs": 6}, {"kind": "lhs"}, "runs", samples=True,
           kind="lhs"),
    Source("csv", {"csv": "configs.csv"}, {"csv": "bad.csv"}, "bad.csv",
           files={"configs.csv": CSV, "bad.csv": "a,b,c,e\n1,0.5,x,1\n"}, kind="csv"),
    Source("configs", {"configs": [{"a": 1, "b": 0.5, "c": "x", "d": 1},
                                   {"a": 3, "b": 0.0, "c": "y", "d": 2}]},
           {"configs": [{"a": 9, "b": 0.5, "c": "x", "d": 1}]}, "9", kind="configs"),
    Source("tune", {"kind": "tune", "budget": 8, "strategy": "tpe", "objectives": ["y"],
                    "screen_runs": 4},
           {"kind": "tune", "budget": 8, "strategy": "bogus", "objectives": ["y"]}, "bogus",
           samples=True, kind="tune"),
]


def test_every_design_kind_and_source_is_under_the_contract() -> None:
    assert set(KINDS) | {"csv", "configs", "tune"} <= {s.name for s in SOURCES}


def write(d: Path, src: Source, design: dict[str, Any], seed: int = 1) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in src.files.items():
        (d / name).write_text(text)
    spec = {"name": f"contract-{src.name}", "seed": seed, "randomize": True,
            "space": {"factors": FACTORS, "responses": [{"name": "y", "goal": "maximize"}]},
            "design": design,
            "runner": {"type": "command", "options": {
                "command": [sys.executable, "-c", PROGRAM, "{a}", "{b}", "{c}", "{d}"],
                "json_metrics": {"y": "y"}}}}
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def configs_of(camp: Campaign) -> list[tuple[int, dict[str, Any]]]:
    with Store(camp.store_path) as st:
        return [(cid, cfg) for cid, cfg, _ in st.configs()]


def plan_of(camp: Campaign) -> list[tuple[str, dict[str, Any]]]:
    return [(r.key, r.config) for r in camp.plan()]


@pytest.fixture(params=SOURCES, ids=[s.name for s in SOURCES])
def source(request: pytest.FixtureRequest) -> Source:
    return request.param


def test_shape(source: Source, tmp_path: Path) -> None:
    camp = Campaign.load(write(tmp_path, source, source.design))
    summary = camp.run()
    assert summary.failed == 0 and summary.ok >= 2
    for _, cfg in configs_of(camp):
        assert list(cfg) == ["a", "b", "c", "d"]
        camp.space.validate(cfg)
        assert isinstance(cfg["a"], int) and isinstance(cfg["b"], (int, float))
        assert cfg["c"] in ("x", "y") and cfg["d"] in (1, 2)
    runs = camp.results("run")
    assert [c for c in runs.columns if c not in BOOKKEEPING] == RUN_COLUMNS
    assert list(runs.columns[:6]) == RUN_COLUMNS[:6]  # the factors right after the ids
    assert (runs["status"] == "ok").all() and runs["y"].notna().all()
    assert pd.api.types.is_integer_dtype(runs["a"]) and pd.api.types.is_float_dtype(runs["y"])
    per_config = camp.results("config")
    assert list(per_config.columns[:5]) == ["config_id", "a", "b", "c", "d"]
    assert {"y", "_n_ok", "_n_failed"} <= set(per_config.columns)
    meta = camp.design_meta()
    assert meta["kind"] == source.kind
    with Store(camp.store_path) as st:
        assert json.loads(st.get_meta("design") or "{}")["kind"] == source.kind


def test_a_bad_option_is_one_line(source: Source, tmp_path: Path) -> None:
    path = write(tmp_path, source, source.bad)
    with pytest.raises(StorlabError) as exc:
        Campaign.load(path).preflight()
    msg = str(exc.value)
    assert "\n" not in msg and source.names in msg and str(tmp_path) in msg, msg
    assert not (tmp_path / "campaign.db").exists()


def test_deterministic_for_a_seed(source: Source, tmp_path: Path) -> None:
    one = Campaign.load(write(tmp_path / "one", source, source.design, seed=7))
    two = Campaign.load(write(tmp_path / "two", source, source.design, seed=7))
    one.run()
    two.run()
    assert configs_of(one) == configs_of(two) and plan_of(one) == plan_of(two)
    if source.samples:
        other = Campaign.load(write(tmp_path / "other", source, source.design, seed=8))
        other.run()
        assert [c for _, c in configs_of(other)] != [c for _, c in configs_of(one)]
