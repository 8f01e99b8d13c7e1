"""The measured tables the tuning benchmark replays (benchmarks/data/) hold every
configuration their space allows, each once (a full factorial, or every combination the
dataset's constraints allow): the true value of any configuration a tuner recommends is
known."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from tune_datasets import (  # noqa: E402
    NAMES, constraints, dataset_names, feasible_grid, load_dataset, summary)


def test_dataset_names_reads_the_option_and_refuses_an_unknown_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert dataset_names(" bdbj, bdbc,") == ["bdbj", "bdbc"]
    with pytest.raises(SystemExit) as stop:
        dataset_names("bdbj,nope")
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'nope'" in err[0] and "bdbj" in err[0]


@pytest.mark.parametrize("name", NAMES)
def test_every_table_holds_each_allowed_configuration_once(name: str) -> None:
    df, response, goal, params = load_dataset(name)
    assert goal in ("minimize", "maximize") and response not in params
    assert not df.duplicated(params).any()
    assert df[response].notna().all()
    grid = feasible_grid(name)
    assert len(df) == len(grid)
    both = grid.merge(df[params], how="outer", indicator=True)["_merge"]
    assert (both == "both").all()
    if not constraints(name):
        assert len(df) == math.prod(df[p].nunique() for p in params)


def test_mongodb_is_its_storage_options_with_the_journal_constraint() -> None:
    df, response, goal, params = load_dataset("mongodb")
    assert (response, goal) == ("performance", "minimize")
    assert params == ["journal", "journal_compressor", "journal_commit_interval_ms",
                      "block_compressor", "index_prefix_compression", "cache_size_mib"]
    assert sorted(df["cache_size_mib"].unique()) == [256, 512, 1024, 2048, 4096]
    off = df[df["journal"] == 0]
    # without a journal the table has one commit interval and no journal compressor
    assert set(off["journal_commit_interval_ms"]) == {1}
    assert set(off["journal_compressor"]) == {"none"}
    assert len(off) == 30 and len(df) == 570
    s = summary("mongodb")
    assert (s["optimum"], s["within_5pct"], s["feasible"]) == (206356.0, 29, 570)


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
