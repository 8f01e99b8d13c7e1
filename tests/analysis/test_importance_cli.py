"""`storlab importance` and `storlab importance-eval` end to end."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)


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


def test_importance_json(storlab_main, results, tmp_path):
    code, out, err = storlab_main("importance", str(results), "--response", "tput",
                          "--params", "journal,device,bs,sched", "--stop", "top:2", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert [s["param"] for s in data["selected"]] == ["journal", "device"]
    assert data["selected"][0]["best_value"] in ("ordered", "writeback")
    assert data["selected"][1]["best_value"] == "ssd"
    assert set(data["pi"]) == {"journal", "device", "bs", "sched"}
    assert data["n_rows"] == 48 and data["n_configs"] == 24


def test_importance_compare(storlab_main, results):
    code, out, err = storlab_main("importance", str(results), "-y", "tput", "--params",
                          "journal,device,bs,sched", "--compare", "--json")
    assert code == 0, err
    rows = {r["param"]: r for r in json.loads(out)["compare"]}
    assert rows["journal"]["sobol_st"] >= rows["journal"]["sobol_s1"] > 0.5


def test_importance_table_plot_and_output_file(storlab_main, results, tmp_path):
    plot = tmp_path / "imp.png"
    out_json = tmp_path / "imp.json"
    code, out, err = storlab_main("importance", str(results), "-y", "latency_ms", "--goal",
                          "min", "-p", "journal,device,bs,sched", "--plot", str(plot),
                          "-o", str(out_json))
    assert code == 0, err
    assert "journal" in out and "PI of every parameter" in out
    assert plot.stat().st_size > 1000
    assert json.loads(out_json.read_text())["goal"] == "minimize"


def test_importance_takes_the_goal_from_the_space(storlab_main, results, tmp_path):
    """A space declaring latency_ms `goal: minimize`: without --goal the best values are the
    fast ones (it used to assume maximize and name the slowest journal mode as best)."""
    space = tmp_path / "space.yaml"
    space.write_text("factors:\n"
                     "  - {name: journal, kind: categorical, values: [ordered, journal, writeback]}\n"
                     "  - {name: device, kind: categorical, values: [hdd, ssd]}\n"
                     "  - {name: bs, kind: integer, values: [1024, 4096]}\n"
                     "  - {name: sched, kind: categorical, values: [noop, cfq]}\n"
                     "responses:\n  - {name: latency_ms, unit: ms, goal: minimize}\n")
    code, out, err = storlab_main("importance", str(results), "-y", "latency_ms", "--space",
                          str(space), "--stop", "top:2", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["goal"] == "minimize"
    best = {s["param"]: s["best_value"] for s in data["selected"]}
    assert best["journal"] != "journal" and best["device"] == "ssd"
    code, out, err = storlab_main("importance", str(results), "-y", "latency_ms", "--space",
                          str(space), "--stop", "top:2")
    assert code == 0, err
    assert "latency_ms (minimize) mean" in " ".join(out.split())
    # --goal still overrides the space
    code, out, err = storlab_main("importance", str(results), "-y", "latency_ms", "--space",
                          str(space), "--goal", "max", "--stop", "top:2", "--json")
    assert json.loads(out)["goal"] == "maximize"


@pytest.mark.parametrize("argv, needle", [
    (["--response", "nope"], "'nope'"),
    (["--response", "tput", "--params", "journal,zzz"], "'zzz'"),
    (["--response", "tput", "--stop", "top:x"], "top:x"),
    (["--response", "tput", "--aggregate", "median"], "median"),
])
def test_importance_bad_input_exit_2(storlab_main, results, argv, needle):
    code, out, err = storlab_main("importance", str(results), *argv)
    assert code == 2
    assert needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_importance_missing_file(storlab_main, tmp_path):
    code, _, err = storlab_main("importance", str(tmp_path / "none.csv"), "-y", "y")
    assert code == 2 and "none.csv" in err


def test_importance_eval_cli(storlab_main, results, tmp_path):
    plot = tmp_path / "fig5.png"
    code, out, err = storlab_main("importance-eval", str(results), "-y", "tput",
                          "--params", "journal,device,bs,sched", "--fractions", "0.2,0.5",
                          "--repeats", "20", "--ranks", "2", "--jobs", "1", "--json",
                          "--plot", str(plot))
    assert code == 0, err
    data = json.loads(out)
    assert [t["param"] for t in data["truth"]] == ["journal", "device"]
    assert [r["configs"] for r in data["table"]] == [5, 12]
    assert plot.exists()
    code, out, err = storlab_main("importance-eval", str(results), "-y", "tput",
                          "--fractions", "0.2,abc")
    assert code == 2 and "--fractions" in err


# ----------------------------------------------------------------- which columns are parameters
@pytest.fixture
def fio_results(tmp_path):
    """A table as `storlab results` writes it for an 8-run fio design: three factors, the
    design's bookkeeping and fio's metrics, each metric with few distinct values (8)."""
    rng = np.random.default_rng(3)
    grid = list(itertools.product(["4k", "64k"], [0, 100], [1, 4]))
    df = pd.DataFrame(grid, columns=["bs", "rwmixread", "iodepth"])
    df.insert(0, "config_id", range(1, 9))
    df["std_order"], df["replicate"], df["block"], df["center"] = range(1, 9), 1, 1, False
    size = df["bs"].map({"4k": 4096, "64k": 65536})
    iops = np.where(df["rwmixread"] == 100, 9000.0, 3000.0) * (1 + 0.3 * (df["iodepth"] == 4)) \
        * rng.uniform(0.97, 1.03, 8)
    df["read_iops"] = iops * df["rwmixread"] / 100
    df["write_iops"] = iops - df["read_iops"]
    df["read_clat_p99_us"] = np.where(df["rwmixread"] > 0, rng.uniform(50, 90, 8), np.nan)
    df["total_iops"] = iops
    df["total_bw_bytes"] = iops * size
    df["usr_cpu"] = rng.uniform(1, 5, 8)
    df["_n_ok"], df["_n_failed"] = 1, 0
    path = tmp_path / "results.csv"
    df.to_csv(path, index=False)
    return path


def test_importance_without_params_ranks_only_settings(storlab_main, fio_results):
    """The README's form (no --params) on a storlab results table: the measured metrics
    beside the response are never ranked as settings (it once picked read_iops, 85 %)."""
    code, out, err = storlab_main("importance", str(fio_results), "--response",
                          "total_bw_bytes", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert set(data["pi"]) == {"bs", "rwmixread", "iodepth"}
    assert {s["param"] for s in data["selected"]} <= {"bs", "rwmixread", "iodepth"}
    assert all(0 <= s["share"] <= 1 for s in data["selected"])


def test_importance_takes_the_parameters_from_a_space(storlab_main, fio_results, tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("factors:\n  - {name: bs, kind: ordinal, values: [4k, 64k]}\n"
                     "  - {name: iodepth, kind: integer, values: [1, 4]}\n")
    code, out, err = storlab_main("importance", str(fio_results), "-y", "total_iops",
                          "--space", str(space), "--json")
    assert code == 0, err
    assert set(json.loads(out)["pi"]) == {"bs", "iodepth"}
    other = tmp_path / "other.yaml"
    other.write_text("factors:\n  - {name: numjobs, kind: integer, values: [1, 2]}\n")
    code, out, err = storlab_main("importance", str(fio_results), "-y", "total_iops",
                          "--space", str(other))
    assert code == 2 and "numjobs" in err and len(err.strip().splitlines()) == 1


def test_importance_takes_a_campaign_file(tmp_path, storlab_main):
    """A campaign file: its runs and its space's factors (repetitions averaged, their
    spread shown), as `storlab report` takes it."""
    import sys

    import yaml

    script = ("import json, sys; n, m = int(sys.argv[1]), sys.argv[2]; "
              "print(json.dumps({'y': 100 * n + (7 if m == 'b' else 0), 'other': n * 3}))")
    camp = tmp_path / "campaign.yaml"
    camp.write_text(yaml.safe_dump({
        "name": "imp", "seed": 1, "timeout": 60, "repetitions": 2,
        "space": {"factors": [{"name": "n", "kind": "integer", "values": [1, 2, 3]},
                              {"name": "m", "kind": "categorical", "values": ["a", "b"]}]},
        "design": {"kind": "full"},
        "runner": {"type": "command",
                   "options": {"command": [sys.executable, "-c", script, "{n}", "{m}"],
                               "json_metrics": {"y": "y", "other": "other"}}}}))
    code, out, err = storlab_main("importance", str(camp), "-y", "y")
    assert code == 2 and "no runs yet" in err
    assert storlab_main("run", camp, "-q")[0] == 0
    code, out, err = storlab_main("importance", str(camp), "-y", "y", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert set(data["pi"]) == {"n", "m"}  # not `other`, a measured column
    assert data["n_rows"] == 12 and data["n_configs"] == 6
    assert data["selected"][0]["param"] == "n"
    code, out, err = storlab_main("importance", str(camp), "-y", "y", "--space", str(camp))
    assert code == 2 and "--space" in err


def test_importance_says_when_it_cannot_tell(storlab_main, results):
    """`tput` beside `latency_ms`: many distinct numbers, not a name storlab writes; it may
    be a continuous setting or a measurement, and storlab says it cannot tell."""
    code, out, err = storlab_main("importance", str(results), "-y", "latency_ms")
    assert code == 2
    assert "cannot tell whether tput is a parameter or a measurement" in err
    assert "--params" in err and "--space" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_saturated_design_gets_no_selection(storlab_main, tmp_path):
    """11 factors in a 12-run Plackett-Burman: the PI of each, and a plain statement that
    12 configurations are too few for a greedy selection; no best values, no NaN."""
    from storlab.design import make_design
    from storlab.space import Space

    sp = Space.two_level(11)
    df = make_design(sp, "pb", runs=12, seed=1).table[sp.names].copy()
    df["total_iops"] = np.random.default_rng(0).normal(1000, 300, 12)
    path = tmp_path / "pb.csv"
    df.to_csv(path, index=False)
    code, out, err = storlab_main("importance", str(path), "-y", "total_iops")
    assert code == 0, err
    assert "too few configurations for a selection" in out and "saturated" in out
    assert "best values" not in out and "nan" not in out.lower()
    assert "PI of every parameter" in out


def test_importance_counts_configurations_before_binning(storlab_main, tmp_path):
    """40 distinct continuous configurations, one run each: 40 configurations, the noise
    unknown, and the binning's cells named as such (before: '39 configurations', a
    'median run-to-run RSD' from two different configurations sharing a cell)."""
    rng = np.random.default_rng(4)
    n = 40
    df = pd.DataFrame({p: rng.permutation((np.arange(n) + rng.uniform(size=n)) / n)
                       for p in "ABCDE"})
    df["y"] = 100 + 5 * df["A"] + rng.normal(0, 1, n)
    path = tmp_path / "lhs.csv"
    df.to_csv(path, index=False)
    code, out, err = storlab_main("importance", str(path), "-y", "y", "--params", "A,B,C,D,E")
    assert code == 0, err
    head = " ".join(out.split())
    assert "40 configurations (40 rows)" in head
    assert "no repeated configuration: run-to-run noise unknown" in head
    assert "run-to-run RSD" not in head
    assert "after binning continuous factors into 4 levels," in head


# A planted tuning benchmark: x1 matters (a peak at 6), x2 a little, x4 not at all.
TUNE_ORACLE = r'''
import sys
a = dict(s.split("=", 1) for s in sys.argv[1:])
x1, x4 = int(a["x1"]), float(a["x4"])
print("y=%.6f" % (100 - 3 * (x1 - 6) ** 2 + {"a": 0, "b": 4}[a["x2"]]))
'''


def _tune_campaign(d) -> str:
    import sys

    import yaml

    (d / "oracle.py").write_text(TUNE_ORACLE)
    spec = {"name": "tune-imp",
            "space": {"factors": [
                {"name": "x1", "kind": "integer", "range": [1, 8], "default": 2},
                {"name": "x2", "kind": "categorical", "values": ["a", "b"], "default": "a"},
                {"name": "x4", "kind": "real", "range": [0, 1], "default": 0.5}],
                "responses": [{"name": "y", "goal": "maximize"}]},
            "design": {"kind": "tune", "budget": 20, "screen_runs": 10, "confirm_runs": 2,
                       "confirm_top": 2},
            "runner": {"type": "command", "options": {
                "command": [sys.executable, str(d / "oracle.py"), "x1={x1}", "x2={x2}",
                            "x4={x4}"],
                "regex_metrics": [r"y=(?P<y>[-\d.e]+)"]}},
            "seed": 7}
    p = d / "tune.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(p)


def test_importance_of_a_tuning_campaign_uses_its_screening_runs(storlab_main, tmp_path, monkeypatch):
    """The search holds x4 at one value while it moves x1: over all runs x4's values each
    'explain' a group of runs. Only the screening (a space-filling sample) is analysed,
    and the output says so."""
    monkeypatch.chdir(tmp_path)
    camp = _tune_campaign(tmp_path)
    code, out, err = storlab_main("tune", camp, "--quiet", "--json")
    assert code == 0, err
    phases = json.loads(out)["phases"]
    n = phases["screen"]
    assert n >= 8 and phases.get("tune", 0) > 0
    code, out, err = storlab_main("importance", camp, "-y", "y", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["n_rows"] == n  # the screening runs, not all 20
    assert data["source_note"] == (f"importance from the {n} screening runs of a tuning "
                                   "campaign; the search's runs are not a random sample")
    pi = data["pi"]
    assert max(pi, key=pi.get) == "x1"  # x4 first before: its 10 values, one run each
    code, out, err = storlab_main("importance", camp, "-y", "y")
    assert code == 0, err
    assert (f"note: importance from the {n} screening runs of a tuning campaign"
            in " ".join(out.split()))
    # the report's importance section: the same runs, the same note
    from storlab.report.build import build_report
    from storlab.report.inputs import from_campaign

    rep = build_report(from_campaign(camp), responses=["y"])
    imp = rep.data["responses"]["y"]["importance"]
    assert imp["n_rows"] == n and imp["source_note"] == data["source_note"]
    assert imp["pi"] == pytest.approx(pi)
    # The page's text, not its markup: how an apostrophe is escaped is the template's
    # business (&#39; from Jinja2, &#x27; from html.escape).
    from html import unescape

    assert data["source_note"][1:] in unescape(rep.html())
