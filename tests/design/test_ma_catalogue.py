"""The shipped minimum-aberration catalogue (data/ma_catalogue.json, written by
scripts/ma_catalogue.py with storlab's own exact search): what it says is what the search
finds, and a catalogued case is answered without searching."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from pathlib import Path

import pytest

from storlab.design import aliasing as al
from storlab.design import fractional_factorial
from storlab.design.factorial import (_catalogue, _wlp_of, catalogue_generators,
                                      minimum_aberration, search_generators)
from storlab.space import Space

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "src/storlab/design/data/ma_catalogue.json"
ENTRIES = json.loads(DATA.read_text())["entries"]

# Cases the search solves in well under a second (see scripts/ma_catalogue.py's log):
# spread over every run size from 8 to 128.
CHEAP = ["5-3", "7-3", "9-4", "11-4", "15-4", "8-5", "12-5", "14-5", "9-6", "11-6",
         "9-7", "11-7"]


@pytest.mark.parametrize("key", CHEAP)
def test_catalogue_matches_the_search(key):
    k, n = map(int, key.split("-"))
    found = search_generators(k, n, time_limit=60)
    assert found is not None and found.exact
    assert ENTRIES[key]["wlp"] == found.wlp


def test_every_entry_is_a_valid_fraction_with_its_pattern():
    assert len(ENTRIES) >= 40
    for key, e in ENTRIES.items():
        k, n = map(int, key.split("-"))
        cols = e["columns"]
        assert len(cols) == k - n and len(set(cols)) == len(cols), key
        assert all(0 < c < 2**n and al.popcount(c) >= 2 for c in cols), key
        assert _wlp_of(n, cols) == e["wlp"], key


def test_small_run_sizes_are_complete():
    # every 2^(k-p) design of 8 and 16 runs (k = 4..7, 5..15) is catalogued
    for n in (3, 4):
        for k in range(n + 1, 2**n):
            assert f"{k}-{n}" in ENTRIES


def test_16_factors_in_64_runs_answers_from_the_catalogue():
    # the exact search takes 4-26 s for 2^(16-10) here; the catalogue answers at once
    d = fractional_factorial(Space.two_level(16), runs=64)
    assert d.meta["search"]["source"] == "catalogue" and d.meta["search"]["nodes"] == 0
    assert d.meta["wlp"] == ENTRIES["16-6"]["wlp"] and d.meta["resolution"] == 4
    assert len(d.meta["generators"]) == 10


def test_resolution_requests_use_the_catalogue_too():
    # MA maximises resolution first: when the catalogued design falls short, none exists
    assert minimum_aberration(9, 4, min_resolution=4) is None
    assert search_generators(9, 4, min_resolution=4) is None
    hit = minimum_aberration(8, 4, min_resolution=4)
    assert hit is not None and hit.source == "catalogue"
    d = fractional_factorial(Space.two_level(8), resolution=4)
    assert d.runs == 16 and d.meta["search"]["source"] == "catalogue"


def test_uncatalogued_case_falls_back_to_the_search():
    assert catalogue_generators(3, 1) is None
    r = minimum_aberration(20, 5, time_limit=0.5)
    assert r is not None and r.source == "search"


def test_catalogue_is_package_data():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = conf["tool"]["setuptools"]["package-data"]["storlab"]
    rel = DATA.relative_to(ROOT / "src/storlab").as_posix()
    assert any(fnmatch.fnmatch(rel, g) for g in globs), globs
    assert _catalogue()  # loaded through importlib.resources, as an installed wheel is
