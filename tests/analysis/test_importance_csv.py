"""The pandas-free reading of a plain CSV (`read_coded_csv`, `importance_csv`): the same
selection as `importance` on the frame pandas reads, or None (the caller then takes the
pandas path) whenever the file holds something pandas reads its own way."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storlab.analysis.coded import read_coded_csv
from storlab.analysis.importance import importance, importance_csv
from storlab.campaign.runners import is_metric
from storlab.errors import StorlabError
from storlab.fileio import read_table

#: Values a column may hold: labels, integers, decimals, and what pandas reads specially.
LABELS = ["a", "b", "ssd", "hdd", "mq-deadline", "none", "x" * 20, "longer-label-over-16"]
INTS = ["1", "2", "3", "007", "-4", "+5", "10", "12345678901"]
FLOATS = ["0.5", "1.0", "2.25", "1e3", ".5", "-3.5"]
ODD = ["", "NA", "nan", "inf", "True", "1_0", "null", "-0"]


def _write(tmp: Path, name: str, columns: dict[str, list[str]]) -> Path:
    p = tmp / name
    rows = zip(*columns.values())
    p.write_text(",".join(columns) + "\n" + "".join(",".join(r) + "\n" for r in rows))
    return p


def _same(a, b) -> None:
    assert a.to_dict() == b.to_dict()
    assert a.pi_rows() == b.pi_rows()
    assert [r["best_value"] for r in a.step_rows()] == [r["best_value"] for r in b.step_rows()]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_fast_reading_agrees_with_pandas_or_steps_aside(tmp_path: Path, data) -> None:
    n = data.draw(st.integers(8, 40))
    pools = data.draw(st.lists(st.sampled_from([LABELS, INTS, FLOATS, LABELS + ODD, INTS + ODD,
                                                INTS + FLOATS, LABELS + INTS]),
                               min_size=1, max_size=3))
    cols = {f"p{j}": data.draw(st.lists(st.sampled_from(pool[:data.draw(st.integers(2, len(pool)))]),
                                        min_size=n, max_size=n))
            for j, pool in enumerate(pools)}
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    cols["tput"] = [repr(float(v)) for v in rng.normal(100, 10, n).round(3)]
    path = _write(tmp_path, f"t{data.draw(st.integers(0, 10**9))}.csv", cols)
    fast, fast_error = _outcome(lambda: importance_csv(path, "tput", stop="top:2"))
    slow, slow_error = _outcome(lambda: importance(read_table(path), "tput", stop="top:2"))
    if slow_error:  # the pandas path refuses: the fast one says the same or steps aside
        assert fast is None and fast_error in (None, slow_error), (fast_error, slow_error)
        return
    assert fast_error is None, fast_error
    if fast is not None:
        _same(fast, slow)


def _outcome(call):  # noqa: ANN001, ANN202
    """(result, None) or (None, the one-line error)."""
    try:
        return call(), None
    except StorlabError as exc:
        return None, str(exc)


def test_big_table_matches_pandas_and_keeps_pandas_unloaded(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n = 3000
    cols = {"dev": [["ssd", "hdd", "nvme-long-device-name"][i] for i in rng.integers(0, 3, n)],
            "qd": [str(v) for v in rng.choice([1, 4, 16, 64], n)],
            "bs": [str(v) for v in rng.choice([0.5, 4.0, 64.0], n)],
            "total_iops": [repr(float(v)) for v in rng.normal(5, 1, n)],
            "tput": [repr(float(v)) for v in rng.normal(100, 10, n)]}
    path = _write(tmp_path, "big.csv", cols)
    fast = importance_csv(path, "tput", stop="top:3", is_metric=is_metric)
    assert fast is not None
    _same(fast, importance(read_table(path), "tput", stop="top:3", is_metric=is_metric))
    table = read_coded_csv(path, {"tput"})
    assert table is not None and table.columns["total_iops"].codes is None  # many numbers
    assert table.columns["qd"].values == [1, 4, 16, 64]
    assert table.columns["bs"].values == [0.5, 4.0, 64.0]
    code = ("import sys; from storlab.analysis.importance import importance_csv; "
            f"r = importance_csv({str(path)!r}, 'tput', params=['dev', 'qd', 'bs']); "
            "print(r is not None, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "False"]


@pytest.mark.parametrize("text", [
    'a,tput\n"x",1\ny,2\n',          # quotes
    "a,tput\nx y,1\nz,2\n",          # a space
    "a,a\nx,1\ny,2\n",               # a duplicate name
    "a,tput\nx,1\ny\n",              # a short row
    "a,tput\nx,1\ny,NA\n",           # a missing response
    "a,tput\nx,1\ny,lots\n",         # a label among numbers
    "a,tput\nx,1e400\ny,2\n",        # inf
    "a,tput\nx,1\r\ny,2\r\n",        # CRLF
    "a,tput\n",                      # no rows
])
def test_what_pandas_reads_its_own_way_is_left_to_it(tmp_path: Path, text: str) -> None:
    p = tmp_path / "t.csv"
    p.write_text(text)
    assert importance_csv(p, "tput", stop="top:1") is None


def test_a_label_wider_than_the_sample_is_read_whole(tmp_path: Path) -> None:
    rows = ["a,b"] * 3000 + ["a" * 70 + ",b"]  # past the lines the widths are chosen on
    cols = {"k": [r.split(",")[0] for r in rows], "j": ["u", "v"] * 1500 + ["u"],
            "tput": [str(float(i % 7)) for i in range(len(rows))]}
    path = _write(tmp_path, "wide.csv", cols)
    table = read_coded_csv(path, {"tput"})
    assert table is not None and table.columns["k"].values == ["a", "a" * 70]
    fast = importance_csv(path, "tput", params=["k", "j"], stop="top:2")
    assert fast is not None and not math.isnan(fast.variance)
    _same(fast, importance(read_table(path), "tput", params=["k", "j"], stop="top:2"))
