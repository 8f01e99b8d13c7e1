"""The `storlab design` and `storlab analyze` commands, as a user runs them, through the
program's entry point in this process (`storlab_quick`: what these tests check is the
output, and a process per call cost ~35 program start-ups; the installed program and real
processes are tested in test_cli_installed.py and test_cli_errors_and_pipes.py)."""

import itertools
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_design_quick_lookup_json(storlab_quick):
    r = storlab_quick("design", "--factors", 5, "--kind", "fractional", "--runs", 8, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for key in ("kind", "runs", "factors", "resolution", "generators", "wlp", "clear_2fi",
                "aliases", "table"):
        assert key in d
    assert d["runs"] == 8 and d["resolution"] == 3 and d["factors"] == list("ABCDE")
    assert d["generators"] == ["D=AB", "E=AC"]
    assert d["wlp"][:3] == [0, 0, 2] and len(d["table"]) == 8


def test_design_pb_default_size(storlab_quick):
    r = storlab_quick("design", "--factors", 7, "--kind", "pb", "--json")
    assert json.loads(r.stdout)["runs"] == 8
    r = storlab_quick("design", "--factors", 8, "--kind", "pb", "--json")
    assert json.loads(r.stdout)["runs"] == 12


def test_design_space_file_to_csv(storlab_quick, tmp_path):
    out = tmp_path / "d.csv"
    r = storlab_quick("design", ROOT / "examples/spaces/ceph-filestore-ssd.yaml", "--kind",
                      "fractional", "--resolution", "V", "--center", 5, "--seed", 1, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "resolution V" in r.stdout
    t = pd.read_csv(out)
    assert len(t) == 128 + 5 and t["center"].sum() == 5


def test_analyze_round_trip(storlab_quick, tmp_path):
    r = storlab_quick("design", "--factors", 3, "--kind", "full", "--no-randomize", "-o",
                      tmp_path / "d.csv")
    assert r.returncode == 0, r.stderr
    t = pd.read_csv(tmp_path / "d.csv")
    t["distance"] = [2.10, 0.90, 3.35, 1.50, 5.15, 2.40, 8.20, 4.55]
    t.to_csv(tmp_path / "r.csv", index=False)
    r = storlab_quick("analyze", tmp_path / "r.csv", "--response", "distance", "--json",
                      "--plots", tmp_path / "plots")
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)
    eff = {t["term"]: t["effect"] for t in a["terms"]}
    assert eff["A"] == pytest.approx(-2.3625) and eff["B:C"] == pytest.approx(0.8375)
    assert {"source", "ss", "df", "F", "p", "pct"} <= set(a["anova"][0])
    assert "pse" in a and a["pse"] > 0
    assert len(list((tmp_path / "plots").glob("*.png"))) == 4
    human = storlab_quick("analyze", tmp_path / "r.csv", "--response", "distance")
    assert "recommendation" in human.stdout and "ANOVA" in human.stdout


@pytest.mark.parametrize("args,msg", [
    (["design", "--factors", 3, "--kind", "nope"], "design kind 'nope'"),
    (["design", "--factors", 9, "--kind", "fractional", "--runs", 8], "at least 16 runs"),
    (["design", "--factors", 3, "--kind", "pb", "--runs", 6], "multiple of 4"),
    (["design", "--factors", 3, "--resolution", "Z"], "--resolution"),
    (["design", "missing.yaml"], "missing.yaml: file not found"),
    (["analyze", "missing.csv", "--response", "y"], "missing.csv: file not found"),
])
def test_bad_input_one_line_exit_2(storlab_quick, args, msg):
    r = storlab_quick(*args)
    assert r.returncode == 2
    assert msg in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_malformed_space_names_file_and_factor(storlab_quick, tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("factors:\n  - {name: bs, kind: ordinal}\n")
    r = storlab_quick("design", p)
    assert r.returncode == 2
    assert f"{p}: factor 'bs': an ordinal factor needs 'values'" in r.stderr


def test_analyze_log_transform(storlab_quick, tmp_path):
    r = storlab_quick("design", "--factors", 3, "--kind", "full", "--no-randomize", "-o",
                      tmp_path / "d.csv")
    assert r.returncode == 0, r.stderr
    t = pd.read_csv(tmp_path / "d.csv")
    t["iops"] = 100 * 3.0 ** (t["A"] > 0) * 2.0 ** (t["B"] > 0) * 1.01 ** t["C"]
    t.to_csv(tmp_path / "r.csv", index=False)
    r = storlab_quick("analyze", tmp_path / "r.csv", "-y", "iops", "--transform", "log", "--json")
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)
    ratio = {t["term"]: t["ratio"] for t in a["terms"]}
    assert a["transform"] == "log" and ratio["A"] == pytest.approx(3.0)
    human = storlab_quick("analyze", tmp_path / "r.csv", "-y", "iops", "--transform", "log")
    assert "log(iops)" in human.stdout and "ratio" in human.stdout
    bad = storlab_quick("analyze", tmp_path / "r.csv", "-y", "iops", "--transform", "cube")
    assert bad.returncode == 2 and "transform 'cube'" in bad.stderr


def test_design_to_file_prints_a_summary_not_the_whole_table(storlab_quick, tmp_path):
    """`design -o file.csv` on a large LHS: the summary and the first rows on the terminal,
    every run in the file (rendering 100,000 rows on the terminal took 272 s)."""
    out = tmp_path / "lhs.csv"
    r = storlab_quick("design", ROOT / "examples/spaces/fio-pb.yaml", "--kind", "lhs", "--runs",
                      20000, "--seed", 1, "-o", out)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) < 30, r.stdout
    assert "first 10 of 20000 runs" in " ".join(lines)
    said = " ".join(r.stdout.split())  # rich wraps at 80 columns where the path ends
    assert "20000 runs x" in said and str(out.name) in said
    assert len(pd.read_csv(out)) == 20000
    # Without -o a small design is printed whole, as before.
    r = storlab_quick("design", "--factors", 3, "--kind", "full")
    assert r.returncode == 0 and r.stdout.count("\n│") == 8


def test_resolution_is_a_roman_numeral_for_every_kind(storlab_quick):
    r = storlab_quick("design", "--factors", 11, "--kind", "pb", "--runs", 12)
    assert "resolution III" in r.stdout and "resolution 3" not in r.stdout
    r = storlab_quick("design", "--factors", 6, "--kind", "fractional", "--runs", 32)
    assert "resolution VI" in r.stdout
    from storlab.design.aliasing import roman

    assert [roman(n) for n in (3, 4, 5, 6, 9, 14)] == ["III", "IV", "V", "VI", "IX", "XIV"]


def test_analyze_pb_writes_no_empty_interaction_plot(storlab_quick, tmp_path):
    """A Plackett-Burman design estimates main effects only: no interaction plot (once an
    empty picture with a clipped title), and the output says why."""
    r = storlab_quick("design", "--factors", 7, "--kind", "pb", "--runs", 12, "--seed", 2, "-o",
                      tmp_path / "d.csv")
    assert r.returncode == 0, r.stderr
    t = pd.read_csv(tmp_path / "d.csv")
    t["y"] = 100 + 10 * t["A"] - 5 * t["C"] + 0.1 * t["run"]
    t.to_csv(tmp_path / "r.csv", index=False)
    r = storlab_quick("analyze", tmp_path / "r.csv", "-y", "y", "--factors", "A,B,C,D,E,F,G",
                      "--plots", tmp_path / "plots")
    assert r.returncode == 0, r.stderr
    written = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert written == ["y-halfnormal.png", "y-main.png", "y-pareto.png"]
    said = " ".join(r.stdout.split())  # rich wraps at 80 columns where the path ends
    assert "no interaction plot" in said and "main effects only" in said


def test_design_csv_writes_coded_levels_as_integers(storlab_quick, tmp_path):
    # As R's FrF2 writes them: -1/1 (and 0 for center points), never -1.0/1.0.
    out = tmp_path / "d.csv"
    r = storlab_quick("design", "--factors", 4, "--kind", "fractional", "--runs", 8, "--center", 2,
                      "-o", out)
    assert r.returncode == 0, r.stderr
    lines = out.read_text().splitlines()
    cells = {c for line in lines[1:] for c in line.split(",")[:4]}
    assert cells == {"-1", "1", "0"}, lines[:3]
    back = pd.read_csv(out)
    assert all(back[c].dtype.kind == "i" for c in "ABCD")
    # natural values of a space file keep their own form (a real factor stays real)
    r = storlab_quick("design", "--factors", 2, "--kind", "lhs", "--runs", 5, "-o", out)
    assert pd.read_csv(out)["A"].dtype.kind == "f"


def test_analyze_takes_a_campaign_file(storlab_quick, tmp_path, monkeypatch):
    """`storlab analyze CAMPAIGN.yaml`: the campaign's runs from its store, its space's
    factors and goal (as importance and report take it)."""
    monkeypatch.chdir(tmp_path)  # the campaign is named as a user in its directory would
    (tmp_path / "campaign.yaml").write_text(f"""
name: tiny
space:
  factors:
    - {{name: a, kind: integer, values: [1, 2]}}
    - {{name: b, kind: integer, values: [1, 2]}}
  responses:
    - {{name: t, unit: s, goal: minimize}}
design: {{kind: full}}
runner:
  type: command
  options:
    command: [{sys.executable}, -c, "print('t', 3 * {{a}} + {{b}})"]
    regex_metrics: ['t (?P<t>[\\d.]+)']
""")
    r = storlab_quick("analyze", "campaign.yaml", "-y", "t")
    assert r.returncode == 2 and "no runs yet" in r.stderr and "storlab run" in r.stderr
    assert storlab_quick("run", "campaign.yaml", "-q").returncode == 0
    r = storlab_quick("analyze", "campaign.yaml", "-y", "t", "--json")
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)
    eff = {t["term"]: t["effect"] for t in a["terms"]}
    assert eff["a"] == pytest.approx(3.0) and eff["b"] == pytest.approx(1.0)
    assert a["goal"] == "minimize"
    r = storlab_quick("analyze", "campaign.yaml", "-y", "t", "--space", "campaign.yaml")
    assert r.returncode == 2 and "own space" in r.stderr


@pytest.mark.parametrize("columns", [100, 160])
def test_a_wide_design_is_shown_in_column_blocks_that_fit(storlab, storlab_quick, columns):
    """20 factors do not fit one terminal table (rich turned every cell into '…'): the
    runs come in blocks of columns, each fitting the width and numbering the runs."""
    # a process of its own: the program reads the terminal's width (COLUMNS) as it starts
    r = storlab("design", ROOT / "examples/spaces/fio-pb.yaml", "--kind", "pb",
                "--no-randomize", env={"COLUMNS": str(columns)})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(len(ln.rstrip()) for ln in lines) <= columns
    assert "…" not in r.stdout
    headers = " ".join(ln for ln in lines if ln.startswith("┃"))
    for name in ("operation", "directio", "buffer_alloc", "dummy3", "thread_count"):
        assert f" {name} " in headers, name
    blocks = [ln for ln in lines if ln.startswith("24 runs, columns")]
    assert len(blocks) >= 2 and blocks[0].startswith("24 runs, columns 1-")
    assert all(" # " in ln for ln in lines if ln.startswith("┃"))
    narrow = storlab_quick("design", "--factors", 3, "--kind", "full", "--no-randomize")
    assert "columns" not in narrow.stdout  # a table that fits stays one table


def test_analyze_prints_levels_as_written(storlab_quick, tmp_path):
    """Integer levels print as integers and sizes as written (issue 15: a results file whose
    columns are read as floats printed bs=4096.0, iodepth=32.0), with or without a space."""
    rows = []
    for bs, depth, eng in itertools.product(["4k", "64KiB"], [1, 32], ["libaio", "psync"]):
        rows.append({"bs": bs, "iodepth": float(depth), "engine": eng,  # iodepth: 1.0, 32.0
                     "iops": 1000 - 600 * (bs == "64KiB") + 200 * (depth == 32)
                     + 3 * (eng == "psync")})
    pd.DataFrame(rows).to_csv(tmp_path / "r.csv", index=False)
    assert "32.0" in (tmp_path / "r.csv").read_text()
    r = storlab_quick("analyze", tmp_path / "r.csv", "-y", "iops", "--json")
    assert r.returncode == 0, r.stderr
    settings = {s["factor"]: s["value"] for s in json.loads(r.stdout)["recommendation"]["settings"]}
    assert settings["bs"] == "4k" and settings["iodepth"] == 32
    assert type(settings["iodepth"]) is int
    human = storlab_quick("analyze", tmp_path / "r.csv", "-y", "iops")
    assert "recommendation (maximize): bs=4k, iodepth=32," in human.stdout, human.stdout
    assert "│ iodepth │ factor │ +1              │ 32 " in human.stdout  # the levels table

    space = tmp_path / "s.yaml"
    space.write_text("factors:\n  - {name: bs, kind: ordinal, values: [4k, 64KiB]}\n"
                     "  - {name: iodepth, kind: integer, range: [1, 32]}\n"
                     "  - {name: engine, kind: categorical, values: [libaio, psync]}\n")
    r = storlab_quick("analyze", tmp_path / "r.csv", "-y", "iops", "--space", space, "--json")
    assert r.returncode == 0, r.stderr
    settings = {s["factor"]: s["value"] for s in json.loads(r.stdout)["recommendation"]["settings"]}
    assert settings["bs"] == "4k" and type(settings["iodepth"]) is int


def test_design_prints_each_alias_chain_once(storlab_quick):
    """issue 15: the alias line listed A = BD = CE under A, then BD = A = CE and CE = A = BD."""
    r = storlab_quick("design", "--factors", 5, "--kind", "fractional", "--runs", 8)
    assert r.returncode == 0, r.stderr
    line = " ".join(r.stdout.split()).split("alias chains (to 2FIs): ")[1].split(" 8 runs")[0]
    chains = line.split("; ")
    assert chains[0] == "A = BD = CE"
    assert len({frozenset(c.split(" = ")) for c in chains}) == len(chains) == 7
    # every alias of the JSON is in one printed chain
    aliases = json.loads(storlab_quick("design", "--factors", 5, "--kind", "fractional", "--runs",
                                       8, "--json").stdout)["aliases"]
    sets = [set(c.split(" = ")) for c in chains]
    for k, v in aliases.items():
        assert sum({k, *v} == c for c in sets) == 1, (k, v)


def test_analyze_prints_three_factor_terms_as_written(storlab_quick, tmp_path):
    """rich reads `:b:` as an emoji code: the term A:B:C came out as "A🅱C" (audit F7a)."""
    rows = [dict(A=a, B=b, C=c, y=10 + a + 2 * b + 3 * a * b * c + 0.01 * i)
            for i, (a, b, c) in enumerate(itertools.product([-1, 1], repeat=3))]
    pd.DataFrame(rows + rows).to_csv(tmp_path / "r.csv", index=False)
    r = storlab_quick("analyze", tmp_path / "r.csv", "-y", "y", "--order", 3)
    assert r.returncode == 0, r.stderr
    assert "A:B:C" in r.stdout and "🅱" not in r.stdout


def test_analyze_curvature_line_compares_center_runs_at_their_categorical_levels(
        storlab_quick, tmp_path):
    """Audit F6: `center mean 1048 vs factorial mean 1299` compared psync/4k center runs
    with every engine and size; the line now names the levels it compares at."""
    import re

    import numpy as np

    (tmp_path / "s.yaml").write_text(
        "factors:\n"
        "  - {name: eng, kind: categorical, values: [psync, libaio]}\n"
        "  - {name: iodepth, kind: integer, range: [1, 64], log: true}\n"
        "  - {name: bs, kind: ordinal, values: [4k, 16k, 64k]}\n"
        "responses: [{name: iops, goal: maximize}]\n")
    r = storlab_quick("design", tmp_path / "s.yaml", "--kind", "fractional", "--runs", 8,
                      "--center", 1, "--replicates", 2, "--seed", 1, "-o", tmp_path / "d.csv")
    assert r.returncode == 0, r.stderr
    t = pd.read_csv(tmp_path / "d.csv")
    t["iops"] = (1000 + 300 * (t["eng"] == "libaio") + 100 * np.log2(t["iodepth"]) / 6
                 + 200 * (t["bs"] == "64k") + np.random.default_rng(5).normal(0, 3, len(t)))
    t.to_csv(tmp_path / "r.csv", index=False)
    r = storlab_quick("analyze", tmp_path / "r.csv", "--space", tmp_path / "s.yaml", "-y", "iops")
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())  # rich may wrap the line
    m = re.search(r"curvature: center mean ([\d.]+) vs factorial mean ([\d.]+) \(the "
                  r"\d+ factorial runs at the center runs' eng=psync, bs=4k\)", out)
    assert m, out
    assert abs(float(m[1]) - float(m[2])) < 15
