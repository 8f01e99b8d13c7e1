"""Seed 002's follow-up: a screening's key factors to a full factorial, in one command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from storlab.design import make_design
from storlab.analysis.followup import follow_up_space
from storlab.space import Space

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

ROOT = Path(__file__).resolve().parents[2]
SPACE = ROOT / "examples/spaces/fio-pb.yaml"


def screening(tmp_path: Path) -> tuple[Path, list[str]]:
    """A PB(24) screening of the 20 fio factors where three of them matter."""
    s = Space.from_yaml(SPACE)
    d = make_design(s, "pb", seed=1)
    x = d.coded
    key = [s.names[2], s.names[5], s.names[9]]
    t = d.table.copy()
    t["iops"] = (1000 + 300 * x[key[0]] - 200 * x[key[1]] + 120 * x[key[2]]
                 + np.random.default_rng(2).normal(0, 10, len(t)))
    p = tmp_path / "screen.csv"
    t.to_csv(p, index=False)
    return p, key


def test_top_factors_by_main_effect(tmp_path):
    p, key = screening(tmp_path)
    import pandas as pd

    sub, ranking = follow_up_space(pd.read_csv(p), Space.from_yaml(SPACE), "iops", 3)
    assert set(sub.names) == set(key)
    assert list(ranking["term"][:3]) == key  # |300| > |200| > |120|
    assert len(ranking) == 20


def test_one_command_from_screening_to_full_factorial(storlab_quick, tmp_path):
    p, key = screening(tmp_path)
    r = storlab_quick("design", SPACE, "--follow-up", p, "-y", "iops", "--top", "3", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["kind"] == "full" and d["runs"] == 8 and set(d["factors"]) == set(key)
    # each key factor at the screening space's own low and high
    s = Space.from_yaml(SPACE)
    for k in key:
        assert {str(row[k]) for row in d["table"]} == {str(s[k].low), str(s[k].high)}


def _score_campaign(storlab, tmp_path: Path, prog: str, names: str,
                    repetitions: int = 1) -> Path:
    """A full factorial over two-level integer factors `names`, run for real with `prog`
    (a python program given name=value arguments that prints 'score X'); its file."""
    import yaml

    spec = {"name": "screen", "seed": 1, "repetitions": repetitions,
            "space": {"factors": [{"name": n, "kind": "integer", "range": [0, 1]}
                                  for n in names],
                      "responses": [{"name": "score", "goal": "maximize"}]},
            "design": {"kind": "full"},
            "runner": {"type": "command", "options": {
                "command": [sys.executable, "-c", prog, *(f"{n}={{{n}}}" for n in names)],
                "regex_metrics": [r"score (?P<score>[-\d.]+)"]}}}
    camp = tmp_path / "campaign.yaml"
    camp.write_text(yaml.safe_dump(spec))
    r = storlab("run", camp, "--quiet")
    assert r.returncode == 0, r.stderr
    return camp


def test_follow_up_from_a_campaign_file(storlab, storlab_quick, tmp_path):
    # a screening campaign run for real (a tiny python program as the benchmark): its file
    # alone gives the space, the results and the response
    prog = ("import sys; a = dict(x.split('=') for x in sys.argv[1:]); "
            "print('score', 10 * int(a['a']) - 3 * int(a['b']) + int(a['c']) + 0.1 * int(a['d']))")
    camp = _score_campaign(storlab, tmp_path, prog, "abcd")
    r = storlab_quick("design", "--follow-up", camp, "--top", "2", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["factors"] == ["a", "b"] and d["runs"] == 4 and d["kind"] == "full"


def test_follow_up_tests_effects_on_every_run_of_a_campaign(storlab, storlab_quick, tmp_path):
    """Replicated runs are the error term, as in `storlab analyze`: on configuration means a
    2x2 design's main effects were tested against the interaction alone (1 df) and a large
    interaction hid two real effects."""
    # a, b matter; a large a*b interaction; a little run-to-run noise
    prog = ("import random, sys; a = dict(x.split('=') for x in sys.argv[1:]); "
            "x, y = int(a['a']), int(a['b']); "
            "print('score', 10 * x + 6 * y + 40 * x * y + random.gauss(0, 0.3))")
    camp = _score_campaign(storlab, tmp_path, prog, "ab", repetitions=3)
    r = storlab_quick("design", "--follow-up", camp, "--top", "2", "--json")
    assert r.returncode == 0, r.stderr
    rank = {row["term"]: row for row in json.loads(r.stdout)["follow_up"]["ranking"]}
    assert rank["a"]["significant"] and rank["b"]["significant"]


def test_a_screening_with_no_significant_effect_says_so(storlab_quick, tmp_path):
    """Pure noise: the 'top 3' are the largest noise effects; the command says no main
    effect is significant instead of presenting them as the key factors."""
    import pandas as pd

    s = Space.from_yaml(SPACE)
    t = make_design(s, "pb", seed=1).table.copy()
    t = pd.concat([t, t], ignore_index=True)  # replicated: an error term for the t-tests
    t["iops"] = 1000 + np.random.default_rng(10).normal(0, 10, len(t))
    p = tmp_path / "noise.csv"
    t.to_csv(p, index=False)
    cli = ["design", SPACE, "--follow-up", p, "-y", "iops", "--top", "3"]
    r = storlab_quick(*cli)
    assert r.returncode == 0, r.stderr
    assert ("note: no main effect is significant at family-wise alpha 0.05 (Holm)"
            in " ".join(r.stdout.split()))
    assert ("significance: Holm-adjusted p-values (p_holm) over the 20 main effects'"
            in " ".join(r.stdout.split()))
    j = json.loads(storlab_quick(*cli, "--json").stdout)
    assert j["follow_up"]["note"].startswith("no main effect is significant")
    assert not any(row["significant"] for row in j["follow_up"]["ranking"])
    # noise where one effect passes the uncorrected test by chance: not after Holm's
    # correction for the 20 tests (issue 15)
    t["iops"] = 1000 + np.random.default_rng(5).normal(0, 10, len(t))
    t.to_csv(p, index=False)
    chance = json.loads(storlab_quick(*cli, "--json").stdout)["follow_up"]
    assert sum(row["p"] < 0.05 for row in chance["ranking"]) == 1
    assert not any(row["significant"] for row in chance["ranking"])
    assert chance["note"].startswith("no main effect is significant")
    # one real effect in the noise: said which of the top 3 are chosen by size alone
    x = make_design(s, "pb", seed=1).coded
    t["iops"] += 40 * np.concatenate([x["fsync"], x["fsync"]])
    t.to_csv(p, index=False)
    one = json.loads(storlab_quick(*cli, "--json").stdout)["follow_up"]
    weak = ", ".join(row["term"] for row in one["ranking"][1:3])
    assert one["ranking"][0]["term"] == "fsync"
    assert one["note"] == ("only 1 of the top 3 main effects is significant at family-wise "
                           f"alpha 0.05 (Holm); {weak} chosen by size alone")
    # a screening with three real effects: no note
    good, key = screening(tmp_path)
    g = json.loads(storlab_quick(*cli[:3], good, *cli[4:], "--json").stdout)
    assert g["follow_up"]["note"] is None
    assert [row["term"] for row in g["follow_up"]["ranking"][:3]] == key


def _holm_by_hand(p: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, written out: sorted ascending, the i-th (from 0)
    times (m - i), made monotone, capped at 1."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def test_screening_significance_is_corrected_by_holm(storlab_quick, tmp_path):
    """20 main effects tested at once: `operation` (an inert factor, p = 0.036 by chance in
    this screening) is significant uncorrected, not after Holm; the three real ones stay."""
    p, key = screening(tmp_path)
    r = storlab_quick("design", SPACE, "--follow-up", p, "-y", "iops", "--top", "4", "--json")
    assert r.returncode == 0, r.stderr
    f = json.loads(r.stdout)["follow_up"]
    rank = f["ranking"]
    assert f["correction"] == "holm" and "Holm-adjusted" in f["correction_text"]
    assert [row["p_holm"] for row in rank] == \
        pytest.approx(_holm_by_hand([row["p"] for row in rank]))
    assert [row["term"] for row in rank if row["significant"]] == key
    raw_only = [row["term"] for row in rank if row["p"] < 0.05 and not row["significant"]]
    assert raw_only == [rank[3]["term"]]  # the 4th largest: significant only uncorrected
    assert f["note"] == ("only 3 of the top 4 main effects are significant at family-wise "
                         f"alpha 0.05 (Holm); {rank[3]['term']} chosen by size alone")
    human = storlab_quick("design", SPACE, "--follow-up", p, "-y", "iops", "--top", "4")
    assert ("significance: Holm-adjusted p-values (p_holm) over the 20 main effects' ANOVA "
            "p-values, family-wise alpha 0.05") in " ".join(human.stdout.split())


def test_a_saturated_screening_corrects_lenth_p_values():
    """A saturated PB (7 factors in 8 runs) has no ANOVA error: each effect's p comes from
    Lenth's t (effect / PSE on m/3 df), then Holm."""
    import pandas as pd
    from scipy import stats

    from storlab.analysis.effects import lenth

    s = Space.two_level(7)
    d = make_design(s, "pb", seed=1)
    t = d.table.copy()
    t["y"] = (100 + 30 * d.coded["A"] - 12 * d.coded["C"]
              + np.random.default_rng(1).normal(0, 1, len(t)))
    sub, rank = follow_up_space(t, s, "y", 2)
    assert set(sub.names) == {"A", "C"} and set(rank["basis"]) == {"Lenth t"}
    le = lenth(list(rank["effect"]))
    expect = 2 * stats.t.sf(np.abs(rank["effect"]) / le.pse, le.df)
    assert list(rank["p"]) == pytest.approx(list(expect))
    assert list(rank["p_holm"]) == pytest.approx(_holm_by_hand(list(expect)))
    assert list(rank.loc[rank["significant"], "term"]) == ["A", "C"]
    assert isinstance(rank, pd.DataFrame)


def test_a_resolution_v_screening_keeps_its_interactions_out_of_the_error(tmp_path):
    """2^(5-1) resolution V with a real D:E: in a main-effects-only model D:E and A:B sat in
    the error and hid B and C (Holm called only A significant); tested with the
    interactions the design estimates, A, B, C are significant, and the follow-up on them
    says that D:E, between two factors it leaves out, will not be estimated."""
    from storlab.analysis.followup import follow_up

    s = Space.two_level(5)
    t = make_design(s, "fractional", runs=16, seed=1).table.copy()
    t["y"] = (100 + 10 * t["A"] + 5 * t["B"] - 3 * t["C"] + 4 * t["A"] * t["B"]
              + 6 * t["D"] * t["E"] + np.random.default_rng(3).normal(0, 0.3, len(t)))
    sub, ranking, note = follow_up(t, s, "y", 3)
    assert sub.names == ["A", "B", "C"]
    assert ranking.set_index("term").loc[["A", "B", "C"], "significant"].all()
    assert note is not None and note.startswith("significant two-factor interaction D:E")
    assert "involves D, E" in note
    # a Plackett-Burman screening cannot separate interactions: no such note
    import pandas as pd

    pb, _ = screening(tmp_path)
    assert follow_up(pd.read_csv(pb), Space.from_yaml(SPACE), "iops", 3)[2] is None
