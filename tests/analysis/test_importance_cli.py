"""`storlab importance` and `storlab importance-eval` end to end."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from storlab.cli import main


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def results(tmp_path):
    rng = np.random.default_rng(0)
    grid = list(itertools.product(["ordered", "journal", "writeback"], ["hdd", "ssd"],
                                  [1024, 4096], ["noop", "cfq"]))
    df = pd.DataFrame(grid * 2, columns=["journal", "device", "bs", "sched"])
    df["tput"] = (5000 - 3000 * (df.journal == "journal") + 1000 * (df.device == "ssd")
                  + rng.normal(0, 20, len(df)))
    df["latency_ms"] = 1e6 / df["tput"]
    path = tmp_path / "results.csv"
    df.to_csv(path, index=False)
    return path


def test_importance_json(capsys, results, tmp_path):
    code, out, err = _run(capsys, "importance", str(results), "--response", "tput",
                          "--params", "journal,device,bs,sched", "--stop", "top:2", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert [s["param"] for s in data["selected"]] == ["journal", "device"]
    assert data["selected"][0]["best_value"] in ("ordered", "writeback")
    assert data["selected"][1]["best_value"] == "ssd"
    assert set(data["pi"]) == {"journal", "device", "bs", "sched"}
    assert data["n_rows"] == 48 and data["n_configs"] == 24


def test_importance_compare(capsys, results):
    code, out, err = _run(capsys, "importance", str(results), "-y", "tput", "--params",
                          "journal,device,bs,sched", "--compare", "--json")
    assert code == 0, err
    rows = {r["param"]: r for r in json.loads(out)["compare"]}
    assert rows["journal"]["sobol_st"] >= rows["journal"]["sobol_s1"] > 0.5


def test_importance_table_plot_and_output_file(capsys, results, tmp_path):
    plot = tmp_path / "imp.png"
    out_json = tmp_path / "imp.json"
    code, out, err = _run(capsys, "importance", str(results), "-y", "latency_ms", "--goal",
                          "min", "--plot", str(plot), "-o", str(out_json))
    assert code == 0, err
    assert "journal" in out and "PI of every parameter" in out
    assert plot.stat().st_size > 1000
    assert json.loads(out_json.read_text())["goal"] == "minimize"


@pytest.mark.parametrize("argv, needle", [
    (["--response", "nope"], "'nope'"),
    (["--response", "tput", "--params", "journal,zzz"], "'zzz'"),
    (["--response", "tput", "--stop", "top:x"], "top:x"),
    (["--response", "tput", "--aggregate", "median"], "median"),
])
def test_importance_bad_input_exit_2(capsys, results, argv, needle):
    code, out, err = _run(capsys, "importance", str(results), *argv)
    assert code == 2
    assert needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_importance_missing_file(capsys, tmp_path):
    code, _, err = _run(capsys, "importance", str(tmp_path / "none.csv"), "-y", "y")
    assert code == 2 and "none.csv" in err


def test_importance_eval_cli(capsys, results, tmp_path):
    plot = tmp_path / "fig5.png"
    code, out, err = _run(capsys, "importance-eval", str(results), "-y", "tput",
                          "--params", "journal,device,bs,sched", "--fractions", "0.2,0.5",
                          "--repeats", "20", "--ranks", "2", "--jobs", "1", "--json",
                          "--plot", str(plot))
    assert code == 0, err
    data = json.loads(out)
    assert [t["param"] for t in data["truth"]] == ["journal", "device"]
    assert [r["configs"] for r in data["table"]] == [5, 12]
    assert plot.exists()
    code, out, err = _run(capsys, "importance-eval", str(results), "-y", "tput",
                          "--fractions", "0.2,abc")
    assert code == 2 and "--fractions" in err
