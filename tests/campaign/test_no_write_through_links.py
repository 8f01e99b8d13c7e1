"""Files storlab itself writes outside the sandbox (a runner's job file or config, the
runs' output streams, the writer lock, an Optuna study) never follow a link a campaign
planted: a setup step or the campaign's author could point one at a victim file or a
device. Each case plants the link, runs the real CLI, and compares the victim's bytes."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.fileio import write_fresh

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def campaign(d: Path, runner: dict[str, Any], factor: dict[str, Any] | None = None,
             **extra: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "links", "seed": 1, "timeout": 30, "repetitions": 1,
            "space": {"factors": [factor or {"name": "n", "kind": "ordinal",
                                             "values": [10, 20]}],
                      "responses": [{"name": "y", "goal": "maximize"}]},
            "design": {"kind": "full"}, "runner": runner, **extra}
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


ECHO = {"type": "command", "options": {"command": ["sh", "-c", "echo '{\"y\": {n}}'"],
                                       "json_metrics": {"y": "y"}}}


def test_write_fresh_replaces_a_link_and_never_follows_it(tmp_path: Path, victim: Path
                                                          ) -> None:
    before = digest(victim)
    link = tmp_path / "job.fio"
    link.symlink_to(victim)
    write_fresh(link, "[job]\n")
    assert not link.is_symlink() and link.read_text() == "[job]\n"
    assert digest(victim) == before


@pytest.mark.skipif(shutil.which("postmark") is None, reason="postmark not installed")
def test_a_setup_step_linking_postmark_cfg(tmp_path: Path, victim: Path, storlab: Any
                                           ) -> None:
    before = digest(victim)
    camp = campaign(tmp_path / "c", {"type": "postmark", "options": {"transactions": 50}},
                    {"name": "number", "kind": "integer", "values": [10, 20]},
                    setup=[["ln", "-sf", str(victim), "postmark.cfg"]])
    p = storlab("run", str(camp), timeout=120)
    assert "ok 2, failed 0" in p.stdout, p.stdout + p.stderr  # it ran, on its own config
    assert digest(victim) == before


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_a_setup_step_linking_the_fio_job_file(tmp_path: Path, victim: Path, storlab: Any
                                               ) -> None:
    """Client mode writes job.fio before connecting (no server needed to show it)."""
    before = digest(victim)
    camp = campaign(tmp_path / "c", {"type": "fio", "options": {
        "clients": ["127.0.0.1"], "rw": "read", "size": "1M"}},
        {"name": "bs", "kind": "ordinal", "values": ["4k", "8k"]},
        setup=[["ln", "-sf", str(victim), "job.fio"]], timeout=10)
    p = storlab("run", str(camp), timeout=120)
    assert "ran 2" in p.stdout, p.stdout + p.stderr  # it ran (and failed: no fio server)
    assert digest(victim) == before


def test_a_planted_output_stream_link(tmp_path: Path, victim: Path, storlab: Any) -> None:
    before = digest(victim)
    camp = campaign(tmp_path / "c", ECHO)
    out = tmp_path / "c" / "campaign.db.output"
    out.mkdir()
    (out / "c1-r1.stdout").symlink_to(victim)
    p = storlab("run", str(camp), timeout=120)
    assert p.returncode == 0 and "ok 2, failed 0" in p.stdout, p.stdout + p.stderr
    assert digest(victim) == before and not (out / "c1-r1.stdout").is_symlink()


def test_a_planted_lock_link(tmp_path: Path, victim: Path, storlab: Any) -> None:
    before = digest(victim)
    camp = campaign(tmp_path / "c", ECHO)
    (tmp_path / "c" / "campaign.db.lock").symlink_to(victim)
    p = storlab("run", str(camp), timeout=120)
    assert p.returncode == 2 and "lock" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert digest(victim) == before


def test_an_optuna_storage_through_a_link(tmp_path: Path, victim: Path, storlab: Any) -> None:
    before = digest(victim)
    d = tmp_path / "t"
    camp = campaign(d, ECHO, design={"kind": "tune", "budget": 6, "strategy": "random"})
    (d / "study.db").symlink_to(victim)
    p = storlab("tune", str(camp), "--optuna-storage", f"sqlite:///{d / 'study.db'}",
                timeout=120)
    assert p.returncode == 2 and "symbolic link" in p.stderr, p.stdout + p.stderr
    assert digest(victim) == before


def test_write_in_dir_refuses_a_linked_directory_and_replaces_a_linked_file(
        tmp_path: Path, victim: Path) -> None:
    """The fio JSON directory beside the store and the object-store runner's `records_dir`
    are written through `write_in_dir`: a directory that is a link is refused in one line
    (nothing written where it leads), a file that is a link is replaced, not followed."""
    from storlab.errors import StorlabError
    from storlab.fileio import write_in_dir

    before = digest(victim)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out").symlink_to(elsewhere)
    with pytest.raises(StorlabError, match="records_dir .*out: is a link"):
        write_in_dir(tmp_path / "out", "c1-r1.csv.gz", b"x", what="records_dir")
    assert list(elsewhere.iterdir()) == []
    own = tmp_path / "own"
    own.mkdir()
    (own / "c1-r1.json").symlink_to(victim)
    write_in_dir(own, "c1-r1.json", "{}\n")
    assert (own / "c1-r1.json").read_text() == "{}\n" and digest(victim) == before
    assert sorted(p.name for p in own.iterdir()) == ["c1-r1.json"]  # no temporary left


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_a_planted_fio_json_directory_link(tmp_path: Path, storlab: Any) -> None:
    """`<store>-fio/` beside the store is a link to somebody's directory: storlab stops with
    one line after the first run and writes nothing there."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    camp = campaign(tmp_path / "c", {"type": "fio", "options": {
        "rw": "write", "size": "64k", "ioengine": "psync"}},
        {"name": "bs", "kind": "ordinal", "values": ["4k", "8k"]})
    (tmp_path / "c" / "campaign-fio").symlink_to(theirs)
    p = storlab("run", str(camp), timeout=120)
    assert p.returncode == 2 and "campaign-fio is a symbolic link" in p.stderr, p.stdout + p.stderr
    assert "Traceback" not in p.stderr and list(theirs.iterdir()) == []


def _theirs(tmp_path: Path, names: list[str]) -> tuple[Path, dict[str, str]]:
    """Somebody's directory outside the campaign, holding files with the names storlab
    would make (a lock, an output stream): their digests, to compare after."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    for n in names:
        (theirs / n).write_bytes(b"THEIRS " + n.encode() * 100)
    return theirs, {n: digest(theirs / n) for n in names}


@pytest.mark.parametrize("field,names", [
    ("store", ["s.db.lock"]), ("workdir", ["scratch.lock"])])
def test_a_store_or_workdir_through_a_planted_directory_link(
        tmp_path: Path, storlab: Any, field: str, names: list[str]) -> None:
    """`store: d/s.db` or `workdir: d/scratch`, where `d` is a link planted in the
    campaign's directory to somebody's directory holding files of the names storlab makes
    (`s.db.lock`, `scratch.lock`): refused in one line before any run, nothing written."""
    theirs, before = _theirs(tmp_path, names)
    d = tmp_path / "c"
    camp = campaign(d, ECHO, **{field: "d/s.db" if field == "store" else "d/scratch"})
    (d / "d").symlink_to(theirs)
    p = storlab("run", str(camp), timeout=120)
    assert p.returncode == 2 and "leads through" in p.stderr, p.stdout + p.stderr
    assert "put the campaign's directory itself there" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert {n: digest(theirs / n) for n in names} == before
    assert sorted(x.name for x in theirs.iterdir()) == sorted(names)


def test_the_locks_are_made_from_directories_opened_without_links(tmp_path: Path) -> None:
    """Past the early check (the link planted after it): the lock file is made in the
    directory opened from the campaign's directory one component at a time, so the link
    is refused and the file of that name where it leads keeps its bytes."""
    from storlab.campaign.store import Store
    from storlab.errors import CampaignError

    theirs, before = _theirs(tmp_path, ["scratch.lock"])
    home = tmp_path / "c"
    home.mkdir()
    (home / "d").symlink_to(theirs)
    with Store(home / "s.db") as store:
        with pytest.raises(CampaignError, match="d is a symbolic link"):
            with store.writer_lock(scratch=home / "d" / "scratch", home=home):
                pass
    assert digest(theirs / "scratch.lock") == before["scratch.lock"]


def test_the_output_streams_are_made_from_a_directory_opened_without_links(
        tmp_path: Path) -> None:
    """A run's output directory (`<store>.output`) behind a directory link (a program of a
    run can plant one when the campaign's directory is declared writable): the run fails
    with one storlab line, and `<key>.stdout` where the link leads keeps its bytes."""
    from storlab.campaign.task import RunTask, execute_task

    theirs, before = _theirs(tmp_path, ["c1-r1.stdout", "c1-r1.stderr"])
    home = tmp_path / "c"
    home.mkdir()
    (home / "campaign.db.output").symlink_to(theirs)
    task = RunTask(key="c1-r1", config={}, runner_type="command",
                   runner_options=ECHO["options"], values={"n": 1},
                   workdir=str(home / "scratch" / "c1-r1"), timeout=30, homes=[str(home)],
                   output_dir=str(home / "campaign.db.output"))
    res = execute_task(task).result
    assert res.status == "failed" and "is a symbolic link" in res.stderr, res.stderr
    assert {n: digest(theirs / n) for n in before} == before


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_a_crafted_store_cannot_lead_the_fio_json_export_out(tmp_path: Path, storlab: Any
                                                            ) -> None:
    """A store storlab did not write (INTEGER affinity keeps a text `config_id`): the
    export's file name is made from it, so `1/../../x` would write beside the directory."""
    import sqlite3

    camp = campaign(tmp_path / "c", {"type": "fio", "options": {
        "rw": "write", "size": "64k", "ioengine": "psync"}},
        {"name": "bs", "kind": "ordinal", "values": ["4k", "8k"]})
    assert storlab("run", str(camp), timeout=120).returncode == 0
    with sqlite3.connect(tmp_path / "c" / "campaign.db") as db:
        db.execute("UPDATE runs SET config_id = '1/../../escape' WHERE key = 'c1-r1'")
    out = tmp_path / "export"
    for d in ("c1", ".c1"):  # what the traversal needs inside the export directory
        (out / d).mkdir(parents=True)
    p = storlab("results", str(camp), "--fio-json", str(out), timeout=120)
    assert not list(tmp_path.glob("escape*")), p.stdout + p.stderr
    assert p.returncode == 2 and "config_id" in p.stderr, p.stdout + p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
