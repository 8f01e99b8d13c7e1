"""`storlab tune --optuna-storage URL`: the tuning history as an Optuna study that Optuna's own
API (and so optuna-dashboard, which reads the same storage) opens: one trial per measured
run, in order, with the factor values as params, the values, FAIL for a failed run, and the
phase and replicate as user attrs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

# y = f(mode, depth, x); mode "broken" fails (exit 1), so the history holds failed runs.
PROGRAM = r'''
import json, sys
mode, depth, x = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if mode == "broken":
    sys.exit("broken: no such mode")
print(json.dumps({"y": {"a": 10, "b": 20}[mode] + depth - abs(x - 7)}))
'''


def _campaign(d: Path) -> Path:
    (d / "f.py").write_text(PROGRAM)
    spec = {
        "name": "exported",
        "space": {"factors": [
            {"name": "mode", "kind": "categorical", "values": ["a", "b", "broken"]},
            {"name": "depth", "kind": "ordinal", "values": [1, 4, 16]},
            {"name": "x", "kind": "integer", "range": [0, 10]}],
            "responses": [{"name": "y", "goal": "maximize"}]},
        "design": {"kind": "tune", "budget": 16, "strategy": "tpe", "confirm_runs": 2},
        "runner": {"type": "command", "options": {
            "command": [sys.executable, str(d / "f.py"), "{mode}", "{depth}", "{x}"],
            "json_metrics": {"y": "y"}}},
        "seed": 5, "timeout": 60,
    }
    p = d / "c.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def test_every_run_is_a_trial_of_the_exported_study(tmp_path: Path, storlab_forked: Any) -> None:
    camp = _campaign(tmp_path)
    url = f"sqlite:///{tmp_path / 'study.db'}"
    p = storlab_forked("tune", camp, "--json", "--quiet", "--optuna-storage", url, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "Warning" not in p.stderr, p.stderr  # no library warning on the terminal
    out = json.loads(p.stdout)
    assert out["optuna"] == {"storage": url, "study": "exported", "trials": 16}
    study = optuna.load_study(study_name="exported", storage=url)
    trials = study.get_trials(deepcopy=False)
    hist = out["history"]
    assert [t.datetime_start for t in trials] == sorted(t.datetime_start for t in trials)
    assert len(trials) == len(hist) == 16
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE
    assert study.metric_names == ["y"]
    for t, h in zip(trials, hist):
        assert t.user_attrs["run"] == h["run"] and t.user_attrs["key"] == h["key"]
        assert t.user_attrs["phase"] == h["phase"]
        assert t.user_attrs["replicate"] >= 1
        assert t.params == h["config"]
        assert t.datetime_start is not None and t.datetime_complete >= t.datetime_start
        if h["status"] == "ok":
            assert t.state == TrialState.COMPLETE and t.value == pytest.approx(h["value"])
            assert t.user_attrs["metrics"]["y"] == pytest.approx(h["value"])
        else:
            assert t.state == TrialState.FAIL and t.value is None
    assert any(t.state == TrialState.FAIL for t in trials)  # the broken mode was tried
    assert {t.user_attrs["phase"] for t in trials} >= {"screen", "confirm"}
    d = trials[0].distributions
    assert d["mode"] == CategoricalDistribution(["a", "b", "broken"])
    assert d["depth"] == CategoricalDistribution([1, 4, 16])
    assert d["x"] == IntDistribution(0, 10)
    # Optuna's best is the best single run; storlab's answer (a confirmed mean) is an attr
    assert study.best_value == pytest.approx(max(h["value"] for h in hist if h["value"]))
    assert study.user_attrs["recommended"] == out["best"]["config"]

    # exporting again (a resume of the finished tuning) rewrites the study, not appends
    p = storlab_forked("tune", camp, "--quiet", "--optuna-storage", url, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "wrote 16 runs as trials of the Optuna study 'exported'" in p.stdout
    assert len(optuna.load_study(study_name="exported", storage=url).trials) == 16


def test_a_storage_that_is_no_url_is_one_line(tmp_path: Path, storlab_forked: Any) -> None:
    p = storlab_forked("tune", _campaign(tmp_path), "--optuna-storage", "study.db")
    assert p.returncode == 2 and "not a database URL" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "study.db").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (another user's directory)")
def test_an_optuna_database_in_another_users_directory_is_refused_as_root() -> None:
    """SQLite writes the study by path: as root, a directory another user owns (who could
    swap it for a link to a root-only one) is refused in one line before tuning starts."""
    import shutil
    import tempfile

    from storlab.errors import StorlabError
    from storlab.tune.tuning import _check_optuna_storage

    top = Path(tempfile.mkdtemp(prefix="storlab-optuna-", dir="/tmp"))
    try:
        (top / "theirs").mkdir()
        os.chown(top / "theirs", 65534, 65534)
        with pytest.raises(StorlabError, match="owned by uid 65534"):
            _check_optuna_storage(f"sqlite:///{top}/theirs/study.db")
        _check_optuna_storage(f"sqlite:///{top}/study.db")  # root's own directory: fine
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_an_optuna_database_holding_a_trigger_is_refused(tmp_path: Path,
                                                         storlab_forked: Any) -> None:
    """A8-2 for Optuna's database: a shipped study.db with a trigger (an endless recursive
    query on insert) would run inside root's storlab as it exports; refused in one line
    before a run, the file unchanged. A plain earlier study (Optuna's own schema) is fine."""
    import sqlite3

    camp = _campaign(tmp_path)
    db = tmp_path / "study.db"
    optuna.create_study(study_name="x", storage=f"sqlite:///{db}")
    con = sqlite3.connect(db)
    con.executescript("CREATE TABLE junk (x); CREATE TRIGGER t AFTER INSERT ON trials BEGIN "
                      "INSERT INTO junk WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
                      "SELECT x+1 FROM c) SELECT count(*) FROM c; END;")
    con.close()
    before = db.read_bytes()
    p = storlab_forked("tune", camp, "--quiet", "--optuna-storage", f"sqlite:///{db}",
                       timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip()
    assert err.count("\n") == 0 and "trigger 't' on 'trials'" in err, err
    assert db.read_bytes() == before and not (tmp_path / "exported.db").exists()
    from storlab.tune.tuning import _check_optuna_storage

    other = tmp_path / "plain.db"
    optuna.create_study(study_name="x", storage=f"sqlite:///{other}")
    _check_optuna_storage(f"sqlite:///{other}")


@pytest.mark.skipif(os.geteuid() != 0, reason="the attack is on root's export")
@pytest.mark.parametrize("target", ["file", "fifo"])
def test_a_study_db_planted_during_the_runs_is_refused_at_export(
        tmp_path: Path, storlab_forked: Any, target: str) -> None:
    """The campaign may write `out` (inside its directory); its command plants
    `out/study.db` as a link to a file in a root-only directory (or a FIFO there) after the
    check made before the runs. The export, after the runs, judges it again: refused in
    one line, nothing made where the link leads, the tuning's runs kept in its store."""
    camp_dir = tmp_path / "camp"
    (camp_dir / "out").mkdir(parents=True)
    secret = tmp_path / "rootonly"
    secret.mkdir(mode=0o700)
    victim = secret / "authorized_keys"
    db = camp_dir / "out" / "study.db"
    plant = (f"ln -sf {victim} {db}" if target == "file"
             else f"[ -p {db} ] || mkfifo {db}")
    spec = {
        "name": "planted", "seed": 1, "sandbox": {"writable": ["out"]},
        "space": {"factors": [
            {"name": "k", "kind": "categorical", "values": ["a", "MARKER-LINE"]},
            {"name": "n", "kind": "integer", "values": [1, 2, 3, 4]}]},
        "design": {"kind": "tune", "budget": 6, "objectives": [{"y": "maximize"}]},
        "runner": {"type": "command", "options": {
            "command": ["sh", "-c", f"{plant} 2>/dev/null; echo '{{\"y\": {{n}}}}'"],
            "json_metrics": {"y": "y"}}},
    }
    camp = camp_dir / "campaign.yaml"
    camp.write_text(yaml.safe_dump(spec, sort_keys=False))
    p = storlab_forked("tune", camp, "--quiet", "--optuna-storage", f"sqlite:///{db}",
                       timeout=300)
    err = p.stderr.strip()
    assert os.listdir(secret) == [], err  # nothing made where the link leads
    assert p.returncode != 0 and err.count("\n") == 0, p.stdout + p.stderr
    kind = "a symbolic link" if target == "file" else "not a regular file"
    assert f"{db} is {kind}" in err and "not exported" in err, err
    import sqlite3

    store = next(camp_dir.glob("*.sqlite"), None) or next(camp_dir.rglob("*.db"))
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        assert con.execute("SELECT count(*) FROM runs WHERE status = 'ok'").fetchone()[0] >= 6
    finally:
        con.close()


def test_the_database_is_judged_again_where_it_is_opened(tmp_path: Path) -> None:
    """At export time: a trigger written into the database after the check before the runs
    is refused, so is a journal that is a link; a plain database opens through the held
    directory (/proc/self/fd), and the study lands in the file the URL names."""
    import sqlite3

    from storlab.errors import StorlabError
    from storlab.tune.optuna_storage import held_sqlite

    db = tmp_path / "study.db"
    url = f"sqlite:///{db}"
    with held_sqlite(url) as held:
        assert held.startswith("sqlite:////proc/self/fd/") and held.endswith("/study.db")
        optuna.create_study(study_name="s", storage=held)
    assert optuna.load_study(study_name="s", storage=url).study_name == "s"
    os.symlink(tmp_path / "elsewhere", tmp_path / "study.db-journal")
    with pytest.raises(StorlabError, match="study.db-journal is a symbolic link"):
        with held_sqlite(url):
            pass
    os.unlink(tmp_path / "study.db-journal")
    con = sqlite3.connect(db)
    con.executescript("CREATE TRIGGER t AFTER INSERT ON trials BEGIN SELECT 1; END;")
    con.close()
    with pytest.raises(StorlabError, match=f"{db} holds trigger 't'"):
        with held_sqlite(url):
            pass
    assert not (tmp_path / "elsewhere").exists()
