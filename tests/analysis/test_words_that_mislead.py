"""Words a newcomer reads right: `analyze` on a tuning campaign points to `importance`;
`importance` prints each numeric column in one unit and says what its shares are;
`results --level host` on a campaign without per-host rows says so (it printed a blank
line); two campaign files sharing one store are told apart."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from storlab.commands._common import common_scale

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory, storlab: Any) -> Path:
    d = tmp_path_factory.mktemp("tuned")
    (d / "c.yaml").write_text(yaml.safe_dump({
        "space": {"factors": [{"name": "a", "kind": "integer", "range": [1, 8]},
                              {"name": "b", "values": ["x", "y", "z"]}],
                  "responses": [{"name": "y", "goal": "maximize"}]},
        "design": {"kind": "tune", "budget": 14, "confirm_runs": 2},
        "runner": {"type": "command", "options": {
            "command": [sys.executable, "-c", "import sys; print('y:', sys.argv[1])", "{a}"],
            "regex_metrics": [r"y: (?P<y>\d+)"]}}}))
    r = storlab("run", d / "c.yaml", "-q", cwd=d)
    assert r.returncode == 0, r.stderr
    return d / "c.yaml"


def test_analyze_on_a_tuning_campaign_points_to_importance(tuned: Path,
                                                           storlab_main: Any) -> None:
    code, out, err = storlab_main("analyze", tuned, "-y", "y")
    assert code == 2 and err.count("\n") == 1, err
    assert "a tuning campaign's runs are not a two-level design" in err, err
    assert f"storlab importance {tuned} -y y" in err and "row " not in err


def test_results_level_host_without_host_rows_says_so(tuned: Path, storlab_main: Any) -> None:
    code, out, err = storlab_main("results", tuned, "--level", "host")
    assert code == 2 and "no per-host rows" in err and "--level run" in err, (out, err)


def test_one_unit_per_column() -> None:
    texts, scale = common_scale([2.565e18, 6.678e17, 1.2e15, float("nan")])
    assert scale == "×1e18" and texts == ["2.565", "0.668", "0.001", "-"]
    assert common_scale([5.37, 0.69]) == (["5.370", "0.690"], "")
    assert common_scale([12345.0, 2.0]) == (["12345", "2"], "")  # plain up to 1e6


def test_importance_says_what_its_shares_are(tmp_path: Path, storlab_main: Any) -> None:
    """Two parameters that vary together each explain most of the variance alone: their PI
    shares add up to far more than 100 %, and the output says why; the values are in one
    unit (bytes/s squared reach 1e18)."""
    rng = np.random.default_rng(1)
    a = rng.integers(1, 9, 40)
    b = a + rng.integers(0, 2, 40)
    pd.DataFrame({"a": a, "b": b, "bw": a * 3e9 + b * 1e9 + rng.normal(0, 1e8, 40)}) \
        .to_csv(tmp_path / "r.csv", index=False)
    code, out, err = storlab_main("importance", tmp_path / "r.csv", "-y", "bw")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "these shares overlap" in flat and "share alone" in flat, out
    assert "×1e18" in flat and "e+18" not in flat and "e+17" not in flat, out


def test_two_campaign_files_do_not_share_a_store_silently(tmp_path: Path,
                                                          storlab_main: Any) -> None:
    spec = {"space": {"factors": [{"name": "a", "values": [1, 2]}]},
            "design": {"kind": "full"},
            "runner": {"type": "command", "options": {"command": ["echo", "n: {a}"],
                                                      "regex_metrics": [r"n: (?P<n>\d+)"]}}}
    for name in ("first.yaml", "second.yaml"):
        (tmp_path / name).write_text(yaml.safe_dump(spec))
    assert storlab_main("run", tmp_path / "first.yaml", "-q")[0] == 0
    for command in ("run", "results", "status"):
        code, out, err = storlab_main(command, tmp_path / "second.yaml")
        assert code == 2 and "holds the runs of another campaign file (first.yaml)" in err, err
    # the directory moved: the same file still reads its own store
    moved = tmp_path.parent / (tmp_path.name + "-moved")
    tmp_path.rename(moved)
    assert storlab_main("results", moved / "first.yaml")[0] == 0
