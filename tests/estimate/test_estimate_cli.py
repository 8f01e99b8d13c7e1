"""`storlab estimate fit/predict` end to end: JSON output, saved models, one-line errors."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pandas as pd
import pytest

from storlab.estimate import RWModel


@pytest.fixture
def results(tmp_path):
    df = pd.DataFrame({
        "bs": ["4k", "4k", "4k", "4k", "64k", "64k"],
        "rwmixread": [100, 100, 0, 0, 100, 0],
        "read_iops": [990.0, 1010.0, 0, 0, 200, 0],
        "write_iops": [0, 0, 490.0, 510.0, 0, 400],
    })
    path = tmp_path / "results.csv"
    df.to_csv(path, index=False)
    return path


def test_fit_then_predict_json(storlab_main, tmp_path, results) -> None:
    model = tmp_path / "model.json"
    code, out, _ = storlab_main("estimate", "fit", str(results), "--save-model", str(model),
                        "--json")
    assert code == 0
    data = json.loads(out)
    fits = {f["size"]: f for f in data["fits"]}
    assert fits["4k"]["f_rw"] == pytest.approx(2.0)
    assert fits["4k"]["f_rw_lo"] < 2.0 < fits["4k"]["f_rw_hi"]
    assert fits["64k"]["f_rw"] == pytest.approx(0.5)
    assert model.exists()
    code, out, _ = storlab_main("estimate", "predict", "--model", str(model), "--read-pct",
                        "70", "--sizes", "4k:0.8,64k:0.2", "--mix", "slides", "--json")
    assert code == 0
    rows = {r["size"]: r for r in json.loads(out)["rows"]}
    total = 100 * (0.8 * 1000 / 130 + 0.2 * 200 / 85)
    assert rows["total"]["total_iops"] == pytest.approx(total)


def test_readable_tables_and_files(storlab_main, tmp_path, results) -> None:
    model, plot, csv = tmp_path / "m.json", tmp_path / "fit.png", tmp_path / "mixes.csv"
    code, out, _ = storlab_main("estimate", "fit", str(results), "--save-model", str(model),
                        "--plot", str(plot), "-o", str(csv))
    assert code == 0 and "f_rw model per I/O size" in out
    assert plot.stat().st_size > 1000
    assert set(pd.read_csv(csv)["read_pct"]) == {0, 100}
    code, out, _ = storlab_main("estimate", "predict", "-m", str(model), "--read-pct", "30",
                        "-s", "64k", "--mix", "harmonic")
    assert code == 0 and "prediction at 30% read" in out
    # 64k alone at 30% read: 100 / (30/200 + 70/400)
    assert f"{100 / (30 / 200 + 70 / 400):.3g}" in out


@pytest.mark.parametrize("args, message", [
    (["--read-pct", "101", "-s", "4k:1"], "read percentage 101.0 is outside 0-100"),
    (["--read-pct", "50", "-s", "4k:0.5,64k:0.6"], "sum to 1.1, not 1"),
    (["--read-pct", "50", "-s", "8k:1"], "size 8k is not in the model"),
    (["--read-pct", "50", "-s", "4k:1", "--mix", "cubic"], "--mix 'cubic'"),
])
def test_predict_errors_are_one_line(storlab_main, tmp_path, results, args, message) -> None:
    model = tmp_path / "m.json"
    assert storlab_main("estimate", "fit", str(results), "--save-model", str(model),
                "--json")[0] == 0
    code, out, err = storlab_main("estimate", "predict", "-m", str(model), *args)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_fit_errors(storlab_main, tmp_path) -> None:
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"size": ["4k", "4k"], "read_pct": [100, 0], "read_iops": [1000, 0],
                  "write_iops": [0, 0]}).to_csv(bad, index=False)
    code, _, err = storlab_main("estimate", "fit", str(bad))
    assert code == 2 and "size 4k: 100% write throughput is 0" in err
    code, _, err = storlab_main("estimate", "fit", str(tmp_path / "missing.csv"))
    assert code == 2 and "no such file" in err
    nocol = tmp_path / "nocol.csv"
    pd.DataFrame({"size": ["4k"], "iops": [1]}).to_csv(nocol, index=False)
    code, _, err = storlab_main("estimate", "fit", str(nocol))
    assert code == 2 and "no read percentage column" in err
    code, _, err = storlab_main("estimate", "predict", "-m", str(tmp_path / "nope.json"),
                        "--read-pct", "50")
    assert code == 2 and "no such model file" in err


def test_predict_default_rule_is_harmonic(storlab_main, tmp_path, results) -> None:
    model = tmp_path / "m.json"
    assert storlab_main("estimate", "fit", str(results), "--save-model", str(model),
                "--json")[0] == 0
    rows = {}
    for extra in ([], ["--mix", "harmonic"], ["--mix", "slides"]):
        code, out, err = storlab_main("estimate", "predict", "-m", str(model), "--read-pct", "70",
                              "-s", "4k:0.8,64k:0.2", "--json", *extra)
        assert code == 0, err
        data = json.loads(out)
        rows[tuple(extra)] = [r for r in data["rows"] if r["size"] == "total"][0]["total_iops"]
    harmonic = 1 / (0.8 / (100 * 1000 / 130) + 0.2 / (100 * 200 / 85))
    assert rows[()] == pytest.approx(harmonic)
    assert rows[("--mix", "harmonic")] == pytest.approx(harmonic)
    assert rows[("--mix", "slides")] == pytest.approx(100 * (0.8 * 1000 / 130 + 0.2 * 200 / 85))
    # two anchors per size: the interval says it carries the noise only
    assert "noise only" in data["interval"]


@pytest.mark.parametrize("rows, message", [
    # a mid-mix row with zero throughput next to good anchors (issue 13: was accepted)
    ({"read_pct": [100, 0, 50], "read_iops": [20000, 0, 0], "write_iops": [0, 10000, 0]},
     "size 4k: read 50%: read throughput is 0"),
    ({"read_pct": [100, 0, 50], "read_iops": [20000, 0, 5000], "write_iops": [0, 10000, -1]},
     "must be finite and >= 0"),
    ({"read_pct": [100, 0], "read_iops": [0, 0], "write_iops": [0, 10000]},
     "100% read throughput is 0"),
])
def test_zero_or_negative_throughput_anywhere(storlab_main, tmp_path, rows, message) -> None:
    path = tmp_path / "bad.csv"
    n = len(rows["read_pct"])
    pd.DataFrame({"size": ["4k"] * n, **rows}).to_csv(path, index=False)
    code, out, err = storlab_main("estimate", "fit", str(path))
    assert code == 2, out
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_hand_written_model_with_zero_is_refused(storlab_main, tmp_path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"sizes": [{"size": "4k", "read_iops": 1000,
                                           "write_iops": 0}]}))
    code, _, err = storlab_main("estimate", "predict", "-m", str(path), "--read-pct", "50")
    assert code == 2 and "100% write throughput is 0" in err
    assert len(err.strip().splitlines()) == 1


needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


@pytest.fixture
def shm():
    base = Path("/dev/shm")
    if not base.is_dir():
        pytest.skip("no /dev/shm")
    d = base / f"storlab-test-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@needs_fio
def test_measure_runs_fio_for_real(storlab_main, tmp_path, shm) -> None:
    model, runs = tmp_path / "m.json", tmp_path / "runs.csv"
    code, out, err = storlab_main("estimate", "measure", "--sizes", "4k,64k", "--repeat", "2",
                          "--validate", "50", "--mixed", "4k:0.8,64k:0.2",
                          "--runtime", "1", "--file-size", "16m",
                          "--campaign", str(tmp_path / "camp"), "--target", str(shm),
                          "-O", "numjobs=1", "--seed", "1", "--save-model", str(model),
                          "--runs", str(runs), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert len(data["runs"]) == 2 * (2 * 3 + 1)
    assert {r["status"] for r in data["runs"]} == {"ok"}
    pure = [r for r in data["runs"] if r["kind"] == "anchor" and r["size"] == "4k"]
    by_pct = {r["read_pct"]: r for r in pure}
    assert by_pct[100.0]["write_iops"] == 0 and by_pct[100.0]["read_iops"] > 0
    assert by_pct[0.0]["read_iops"] == 0 and by_pct[0.0]["write_iops"] > 0
    fit = [f for f in data["fits"] if f["size"] == "4k"][0]
    reads = [r["read_iops"] for r in pure if r["read_pct"] == 100.0]
    writes = [r["write_iops"] for r in pure if r["read_pct"] == 0.0]
    assert fit["f_rw"] == pytest.approx((sum(reads) / 2) / (sum(writes) / 2))
    # the 50% mixes measured the model's error: intervals include it
    assert all(c["interval"] == "noise + model error" for c in data["checks"])
    assert RWModel.load(model).fit_for("4k").f_rw == pytest.approx(fit["f_rw"])
    assert "numjobs=1" in data["notes"][-1]
    assert list(shm.iterdir()) == []  # the scratch file is removed
    # whatever storlab writes, storlab reads (issue 15: the mixed rows broke `fit`)
    code, out, err = storlab_main("estimate", "fit", str(runs), "--method", "anchors",
                          "--json")
    assert code == 0, err
    again = json.loads(out)
    assert [f["f_rw"] for f in again["fits"]] == pytest.approx([f["f_rw"] for f in
                                                                data["fits"]])
    assert {m["rule"] for m in again["mixed"]} == {"harmonic", "slides"}


@needs_fio
def test_measure_writes_its_runs_into_the_campaign_it_creates(storlab_main, tmp_path, shm,
                                                              monkeypatch) -> None:
    """Audit LOW-2: `--campaign est --runs est/runs.csv` was refused ("directory est does
    not exist") although the command creates est. Outputs there now pass; one in a missing
    directory elsewhere is still refused before any run (and no campaign is created)."""
    monkeypatch.chdir(tmp_path)
    common = ("estimate", "measure", "--sizes", "4k", "--repeats", "1", "--runtime", "1",
              "--file-size", "4m", "--target", str(shm), "--json")
    code, _, err = storlab_main(*common, "--campaign", "est2", "--runs", "nope/runs.csv")
    assert code == 2 and "directory nope does not exist" in err
    assert not (tmp_path / "est2").exists()
    code, out, err = storlab_main(*common, "--campaign", "est", "--runs", "est/runs.csv",
                                  "--save-model", "est/model.json")
    assert code == 0, err
    runs = pd.read_csv(tmp_path / "est" / "runs.csv")
    assert len(runs) == len(json.loads(out)["runs"]) == 2
    assert RWModel.load(tmp_path / "est" / "model.json").fit_for("4k").f_rw > 0


@needs_fio
def test_measure_exits_1_when_every_run_failed(storlab_main, tmp_path, shm) -> None:
    """Every fio run failing (an engine fio cannot load) is no bad input: exit 1, as
    `storlab run` does when all its runs fail (it was 2)."""
    code, _, err = storlab_main("estimate", "measure", "--sizes", "4k", "--repeats", "1",
                                "--runtime", "1", "--file-size", "4m", "--target", str(shm),
                                "--ioengine", "nosuchengine", "--campaign",
                                str(tmp_path / "camp"), "--json")
    assert code == 1 and "every run failed or was refused" in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_measure_bad_options(storlab_main, tmp_path) -> None:
    code, _, err = storlab_main("estimate", "measure", "--sizes", "4k", "--mixed", "8k:1")
    assert code == 2 and "8k, which --sizes does not measure" in err
    code, _, err = storlab_main("estimate", "measure", "--sizes", "4k", "--campaign",
                        str(tmp_path / "c"), "--target", str(tmp_path / "nope" / "f"))
    assert code == 2 and "does not exist" in err
    code, _, err = storlab_main("estimate", "measure", "--sizes", "4k", "-O", "bs=8k")
    assert code == 2 and "--fio-option bs" in err
    precious = tmp_path / "precious.dat"
    precious.write_text("data")
    code, _, err = storlab_main("estimate", "measure", "--sizes", "4k", "--campaign",
                        str(tmp_path / "c"), "--target", str(precious))
    assert code == 2 and "--allow-destructive" in err
    assert precious.read_text() == "data"
