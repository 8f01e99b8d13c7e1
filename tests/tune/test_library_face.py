"""The library face of tuning and confirmation (`storlab.tune.tune`, `confirm`), called from
Python as a script would, on a planted function (a real command, run in the sandbox through
the campaign loop and store): y = 100 + 10 a + (20 if c == "y")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.errors import CampaignError, PlanMismatch, StorlabError
from storlab.tune import Confirmation, confirm, tune

PROGRAM = ("import json,sys; a,c=sys.argv[1:]; "
           "print(json.dumps({'y': 100 + 10*int(a) + (20 if c == 'y' else 0)}))")
BEST = "a=4,c=y"
REF = "a=1,c=x"


def campaign(d: Path, budget: int, **design: Any) -> Path:
    spec = {"name": "face", "seed": 3,
            "space": {"factors": [{"name": "a", "kind": "integer", "values": [1, 2, 3, 4]},
                                  {"name": "c", "kind": "categorical", "values": ["x", "y"]}],
                      "responses": [{"name": "y", "goal": "maximize"}]},
            "design": {"kind": "tune", "budget": budget, **design},
            "runner": {"type": "command", "options": {
                "command": [sys.executable, "-c", PROGRAM, "{a}", "{c}"],
                "json_metrics": {"y": "y"}}}}
    p = d / "tune.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def test_confirm_from_python_compares_and_a_store_of_others_is_a_type(tmp_path: Path) -> None:
    p = campaign(tmp_path, budget=8)
    out = confirm(p, [BEST], against=REF, runs=2)
    cfg, ref = out.rows
    assert (cfg["role"], ref["role"]) == ("config 1", "reference")
    assert cfg["mean"] == pytest.approx(160.0) and ref["mean"] == pytest.approx(110.0)
    assert out.to_dict()["configs"] == out.rows and not out.interrupted
    # another comparison into the same store: a type the caller can catch, not a text
    other = "a=3,c=y"
    with pytest.raises(PlanMismatch, match="give this comparison its own --store"):
        confirm(p, [other], against=REF, runs=2)
    assert issubclass(PlanMismatch, CampaignError)


def test_confirmation_checks_before_anything_runs(tmp_path: Path) -> None:
    p = campaign(tmp_path, budget=8)
    with pytest.raises(StorlabError, match="not a metric"):
        Confirmation(p, [BEST], against=REF, response="nosuch:maximize")
    with pytest.raises(StorlabError, match="given twice"):
        Confirmation(p, [BEST, {"a": 4, "c": "y"}])
    assert not (tmp_path / "confirm.db").exists()


def test_tune_from_python_holds_the_budget(tmp_path: Path) -> None:
    p = campaign(tmp_path, budget=10, strategy="random")
    out = tune(p)
    assert 5 < len(out.result.history) == out.data["runs"] <= 10 == out.data["budget"]
    with pytest.raises(StorlabError, match="cannot take them back"):
        tune(p, budget=5)
