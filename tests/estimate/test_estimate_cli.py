"""`storlab estimate fit/predict` end to end: JSON output, saved models, one-line errors."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from storlab.cli import main
from storlab.estimate import RWModel


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
    df = pd.DataFrame({
        "bs": ["4k", "4k", "4k", "4k", "64k", "64k"],
        "rwmixread": [100, 100, 0, 0, 100, 0],
        "read_iops": [990.0, 1010.0, 0, 0, 200, 0],
        "write_iops": [0, 0, 490.0, 510.0, 0, 400],
    })
    path = tmp_path / "results.csv"
    df.to_csv(path, index=False)
    return path


def test_fit_then_predict_json(capsys, tmp_path, results) -> None:
    model = tmp_path / "model.json"
    code, out, _ = _run(capsys, "estimate", "fit", str(results), "--save-model", str(model),
                        "--json")
    assert code == 0
    data = json.loads(out)
    fits = {f["size"]: f for f in data["fits"]}
    assert fits["4k"]["f_rw"] == pytest.approx(2.0)
    assert fits["4k"]["f_rw_lo"] < 2.0 < fits["4k"]["f_rw_hi"]
    assert fits["64k"]["f_rw"] == pytest.approx(0.5)
    assert model.exists()
    code, out, _ = _run(capsys, "estimate", "predict", "--model", str(model), "--read-pct",
                        "70", "--sizes", "4k:0.8,64k:0.2", "--json")
    assert code == 0
    rows = {r["size"]: r for r in json.loads(out)["rows"]}
    total = 100 * (0.8 * 1000 / 130 + 0.2 * 200 / 85)
    assert rows["total"]["total_iops"] == pytest.approx(total)


def test_readable_tables_and_files(capsys, tmp_path, results) -> None:
    model, plot, csv = tmp_path / "m.json", tmp_path / "fit.png", tmp_path / "mixes.csv"
    code, out, _ = _run(capsys, "estimate", "fit", str(results), "--save-model", str(model),
                        "--plot", str(plot), "-o", str(csv))
    assert code == 0 and "f_rw model per I/O size" in out
    assert plot.stat().st_size > 1000
    assert set(pd.read_csv(csv)["read_pct"]) == {0, 100}
    code, out, _ = _run(capsys, "estimate", "predict", "-m", str(model), "-r", "30",
                        "-s", "64k", "--mix", "harmonic")
    assert code == 0 and "prediction at 30% read" in out
    # 64k alone at 30% read: 100 / (30/200 + 70/400)
    assert f"{100 / (30 / 200 + 70 / 400):.3g}" in out


@pytest.mark.parametrize("args, message", [
    (["-r", "101", "-s", "4k:1"], "read percentage 101.0 is outside 0-100"),
    (["-r", "50", "-s", "4k:0.5,64k:0.6"], "sum to 1.1, not 1"),
    (["-r", "50", "-s", "8k:1"], "size 8k is not in the model"),
    (["-r", "50", "-s", "4k:1", "--mix", "cubic"], "--mix 'cubic'"),
])
def test_predict_errors_are_one_line(capsys, tmp_path, results, args, message) -> None:
    model = tmp_path / "m.json"
    assert _run(capsys, "estimate", "fit", str(results), "--save-model", str(model),
                "--json")[0] == 0
    code, out, err = _run(capsys, "estimate", "predict", "-m", str(model), *args)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_fit_errors(capsys, tmp_path) -> None:
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"size": ["4k", "4k"], "read_pct": [100, 0], "read_iops": [1000, 0],
                  "write_iops": [0, 0]}).to_csv(bad, index=False)
    code, _, err = _run(capsys, "estimate", "fit", str(bad))
    assert code == 2 and "size 4k: 100% write throughput is 0" in err
    code, _, err = _run(capsys, "estimate", "fit", str(tmp_path / "missing.csv"))
    assert code == 2 and "no such file" in err
    nocol = tmp_path / "nocol.csv"
    pd.DataFrame({"size": ["4k"], "iops": [1]}).to_csv(nocol, index=False)
    code, _, err = _run(capsys, "estimate", "fit", str(nocol))
    assert code == 2 and "no read percentage column" in err
    code, _, err = _run(capsys, "estimate", "predict", "-m", str(tmp_path / "nope.json"),
                        "-r", "50")
    assert code == 2 and "no such model file" in err


needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")


@needs_fio
def test_measure_runs_fio_for_real(capsys, tmp_path) -> None:
    model = tmp_path / "m.json"
    code, out, err = _run(capsys, "estimate", "measure", "--sizes", "4k", "--repeat", "1",
                          "--validate", "50", "--runtime", "1", "--file-size", "8m",
                          "--dir", str(tmp_path), "--seed", "1", "--save-model", str(model),
                          "--json")
    assert code == 0, err
    data = json.loads(out)
    assert [r["status"] for r in data["runs"]] == ["ok"] * 3
    by_pct = {r["read_pct"]: r for r in data["runs"]}
    assert by_pct[100.0]["write_iops"] == 0 and by_pct[100.0]["read_iops"] > 0
    assert by_pct[0.0]["read_iops"] == 0 and by_pct[0.0]["write_iops"] > 0
    assert by_pct[50.0]["read_iops"] > 0 and by_pct[50.0]["write_iops"] > 0
    fit = data["fits"][0]
    assert fit["f_rw"] == pytest.approx(by_pct[100.0]["read_iops"] / by_pct[0.0]["write_iops"])
    check = [c for c in data["checks"] if c["kind"] == "validate"][0]
    assert check["error_pct"] == pytest.approx(
        100 * (check["predicted_iops"] - check["measured_iops"]) / check["measured_iops"])
    assert RWModel.load(model).fit_for("4k").f_rw == pytest.approx(fit["f_rw"])
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]  # scratch file removed


@needs_fio
def test_measure_falls_back_to_buffered_io(capsys, tmp_path, monkeypatch) -> None:
    from storlab.estimate import measure
    monkeypatch.setattr(measure, "probe_direct", lambda d: (False, f"{d} rejects O_DIRECT"))
    plan = measure.MeasurePlan.build("4k", repeat=1, runtime=1, file_size="4m")
    res = measure.run_plan(plan, directory=tmp_path)
    assert any("direct=0" in n for n in res.notes)
    assert "direct=0" in res.notes[-1]  # the fio options actually used
    assert (res.runs["status"] == "ok").all()


def test_measure_bad_options(capsys, tmp_path) -> None:
    code, _, err = _run(capsys, "estimate", "measure", "--sizes", "4k", "--mixed", "8k:1")
    assert code == 2 and "8k, which --sizes does not measure" in err
    code, _, err = _run(capsys, "estimate", "measure", "--sizes", "4k",
                        "--dir", str(tmp_path / "nope"))
    assert code == 2 and "not a directory" in err
