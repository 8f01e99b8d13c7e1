"""The measured tables the tuning benchmark replays (benchmarks/data/) load as complete
full factorials: the true value of any configuration a tuner recommends is known."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from tune_datasets import NAMES, load_dataset, summary  # noqa: E402


@pytest.mark.parametrize("name", NAMES)
def test_every_table_is_a_complete_full_factorial(name: str) -> None:
    df, response, goal, params = load_dataset(name)
    assert goal in ("minimize", "maximize") and response not in params
    assert len(df) == math.prod(df[p].nunique() for p in params)
    assert not df.duplicated(params).any()
    assert df[response].notna().all()


def test_hsqldb_folds_its_feature_model_into_seven_factors() -> None:
    df, response, goal, params = load_dataset("hsqldb")
    assert (response, goal) == ("performance", "minimize")
    assert sorted(params) == sorted(["txc", "encryption", "table", "logging",
                                     "compressed_script", "no_write_delay", "small_log"])
    assert set(df["table"]) == {"memory", "cached", "cached_small_cache",
                                "cached_large_cache"}
    assert "energy" not in df.columns  # another metric of the same runs, not a parameter
    s = summary("hsqldb")
    assert (s["configs"], s["optimum"], s["within_5pct"]) == (864, 248.2, 151)
    raw, *_ = load_dataset("hsqldb", raw=True)
    assert len(raw.columns) == 19  # the published 20 fields less `energy`
