"""The destructive-target guard against the real fio and a real loop device: every way a
campaign could point fio at a block device or at an existing file outside the campaign's
scratch area is refused before anything runs (the device's and the file's bytes are
compared before and after), and `allow_destructive: true` lets the same campaign run."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.campaign import Campaign
from storlab.campaign.runners.fio import FioRunner
from storlab.campaign.spec import CampaignError

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

FIO = {"ioengine": "psync", "rw": "write", "bs": "64k", "size": "1M"}
pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")


def digest(path: str | Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def campaign(d: Path, options: dict[str, Any], **fields: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "t", "seed": 1, "timeout": 60, "repetitions": 1,
            "space": {"factors": [{"name": "iodepth", "kind": "ordinal", "values": [1, 2]}]},
            "design": {"kind": "full"},
            "runner": {"type": "fio", "options": {**FIO, **options}}, **fields}
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


@pytest.fixture
def run(storlab: Any) -> Any:
    """`storlab run CAMP`, finished."""
    def run_campaign(camp: Path) -> subprocess.CompletedProcess[str]:
        return storlab("run", str(camp), timeout=300)
    return run_campaign


def assert_refused(p: subprocess.CompletedProcess[str], camp: Path, *words: str) -> None:
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    for w in words:
        assert w in p.stderr, p.stderr
    assert not (camp.parent / "campaign.db").exists()  # refused before anything ran
    assert not (camp.parent / "scratch").exists()


# ------------------------------------------------------------------ block devices
def _device_bypasses(dev: str) -> list[tuple[dict[str, Any], tuple[str, ...]]]:
    name = os.path.basename(dev)
    return [
        ({"directory": "/dev", "filename": name}, ("block device",)),
        ({"filename_format": dev}, ("block device",)),
        ({"filename_format": "/dev/loop$JOBNUM"}, ("block device",)),  # tokens: any case
        ({"extra_args": [f"--filename={dev}"]}, ("block device",)),
        ({"extra_args": ["--directory=/dev", f"--filename={name}"]}, ("block device",)),
        ({"extra_args": ["--filename", dev]}, ("block device",)),
        ({"write_iolog": dev}, ("block device",)),
        ({"nam": "second", "filename": name}, ("abbreviation",)),
        ({"extra_args": [f"-filename={dev}"]}, ("block device",)),
        ({"extra_args": [f"--filenam={dev}"]}, ("abbreviation",)),
        ({"directo": "/dev", "filename": name}, ("abbreviation",)),
        # fio cuts a filename at ';' (a comment): storlab would check "loopN;x"
        ({"directory": "/dev", "filename": f"{name};x"}, ("comment",)),
        ({"filename": f"{name}\n"}, ("control characters",)),
        ({"filename": f"/tmp:{dev}"}, ("block device",)),
    ]


def test_every_block_device_bypass_is_refused_and_nothing_is_written(
        tmp_path: Path, loopdev: str, run: Any) -> None:
    """Every bypass is refused by the preflight; a sample goes through `storlab run` (one
    line, exit 2, no store, the device's bytes unchanged)."""
    before = digest(loopdev)
    for i, (opts, words) in enumerate(_device_bypasses(loopdev)):
        camp = campaign(tmp_path / f"c{i}", opts)
        with pytest.raises(CampaignError) as exc:
            Campaign.load(camp).preflight()
        for w in words:
            assert w in str(exc.value), (opts, str(exc.value))
        if i % 4 == 0:
            assert_refused(run(camp), camp, *words)
        assert digest(loopdev) == before, opts


def test_a_symlink_made_by_a_setup_step_is_refused_at_run_time(tmp_path: Path,
                                                               loopdev: str, run: Any) -> None:
    """Preflight cannot see what setup steps create: fio's runner checks again, in the run's
    own directory, right before fio starts."""
    before = digest(loopdev)
    camp = campaign(tmp_path / "c", {"filename": "target"},
                    setup=[["ln", "-s", loopdev, "{workdir}/target"]])
    run(camp)
    import sqlite3

    with sqlite3.connect(camp.parent / "campaign.db") as db:
        rows = list(db.execute("select status, stderr_tail from runs"))
    assert len(rows) == 2
    assert all(s == "failed" and "block device" in e for s, e in rows), rows
    assert digest(loopdev) == before


def test_allow_destructive_lets_fio_write_the_device(tmp_path: Path, loopdev: str,
                                                     run: Any) -> None:
    before = digest(loopdev)
    camp = campaign(tmp_path / "c", {"directory": "/dev", "filename":
                                     os.path.basename(loopdev), "allow_destructive": True})
    p = run(camp)
    # `storlab run` exits 0 when some runs fail (1 when all do): "ok 2" says fio ran
    assert p.returncode == 0 and "ok 2, failed 0" in p.stdout, p.stdout + p.stderr
    assert digest(loopdev) != before


# ------------------------------------------------------------------ files outside
def _file_bypasses(victim: Path) -> list[dict[str, Any]]:
    return [
        {"directory": str(victim.parent), "filename": victim.name},
        {"filename": f"../../../{victim.name}"},  # from <tmp>/c/scratch/c1-r1
        {"filename": f"scratch.dat:{victim}"},
        {"filename_format": str(victim)},
        {"directory": str(victim.parent), "filename_format": "$jobname.$jobnum"},
        {"directory": str(victim.parent), "filename_format": victim.name},
        {"opendir": str(victim.parent / "o")},
        {"opendir": "../../../o"},
        {"extra_args": [f"--filename={victim}"]},
        {"extra_args": [f"--directory={victim.parent}"], "filename": victim.name},
        {"extra_args": [f"--opendir={victim.parent / 'o'}"]},
        {"write_iolog": str(victim)},  # fio writes its I/O log over it
        {"extra_args": [f"--output={victim}"]},
    ]


def test_every_existing_file_bypass_is_refused_and_nothing_is_written(
        tmp_path: Path, victim: Path, run: Any) -> None:
    o = victim.parent / "o" / "sub"
    o.mkdir(parents=True)
    inner = o / "mail.db"
    inner.write_bytes(os.urandom(1 << 20))
    default = victim.parent / "storlab.0"
    default.write_bytes(os.urandom(1 << 20))
    before, inner_before, default_before = digest(victim), digest(inner), digest(default)
    for i, opts in enumerate(_file_bypasses(victim)):
        camp = campaign(tmp_path / f"c{i}", opts)
        with pytest.raises(CampaignError, match="outside the campaign.*allow_destructive"):
            Campaign.load(camp).preflight()
        if i % 4 == 1:
            assert_refused(run(camp), camp, "outside the campaign", "allow_destructive")
        assert digest(victim) == before and digest(inner) == inner_before, opts
        assert digest(default) == default_before, opts


def test_a_dangerous_value_in_any_configuration_is_refused_before_the_first_run(
        tmp_path: Path, victim: Path, run: Any) -> None:
    """The guard covers every configuration of the design, not the first one only."""
    before = digest(victim)
    d = tmp_path / "c"
    camp = campaign(d, {}, space={"factors": [
        {"name": "filename", "kind": "categorical", "values": ["mine.dat", str(victim)]}]})
    p = run(camp)
    assert_refused(p, camp, "outside the campaign")
    assert digest(victim) == before


def test_allow_destructive_lets_fio_write_the_file(tmp_path: Path, victim: Path, run: Any) -> None:
    before = digest(victim)
    camp = campaign(tmp_path / "c", {"filename": f"../../../{victim.name}",
                                     "allow_destructive": True})
    p = run(camp)
    assert p.returncode == 0 and "ok 2, failed 0" in p.stdout, p.stdout + p.stderr
    assert digest(victim) != before


def test_fio_default_names_outside_are_fio_leftovers_and_run(tmp_path: Path, run: Any) -> None:
    """`directory: /mnt/test` without a file name: fio writes `storlab.<n>.<m>` there;
    such files left by an earlier run are fio's, so the campaign resumes. A directory
    outside the campaign's needs allow_destructive (refused in one line without)."""
    outside = tmp_path / "mnt"
    outside.mkdir()
    (outside / "storlab.0.0").write_bytes(b"old fio file" * 100)
    p = run(campaign(tmp_path / "u", {"directory": str(outside)}))
    assert p.returncode == 2 and "runner.options.directory" in p.stderr \
        and "allow_destructive" in p.stderr and len(p.stderr.strip().splitlines()) == 1, \
        p.stderr
    p = run(campaign(tmp_path / "c", {"directory": str(outside), "allow_destructive": True}))
    assert p.returncode == 0, p.stderr


def test_a_file_the_campaign_creates_outside_does_not_stop_its_next_runs(
        tmp_path: Path, run: Any) -> None:
    """Before each run only devices are checked again: the file run 1 created outside (in
    a directory the campaign declares writable) is not refused for run 2 (preflight
    already said no file existed there). Undeclared, the campaign is refused before any
    run with a hint to declare its directory (inside the campaign's directory: one
    outside needs allow_destructive, refused naming the option)."""
    target = tmp_path / "c" / "mnt" / "bench.dat"
    target.parent.mkdir(parents=True)
    p = run(campaign(tmp_path / "u", {"filename": str(target)}))
    assert p.returncode == 2 and "runner.options.filename" in p.stderr \
        and "outside the campaign's directory" in p.stderr, p.stdout + p.stderr
    p = run(campaign(tmp_path / "c", {"filename": str(target)}))
    assert p.returncode == 2 and "make the file first" in p.stderr, p.stdout + p.stderr
    assert not target.exists()
    p = run(campaign(tmp_path / "c", {"filename": str(target)},
                     sandbox={"writable": ["mnt"]}))
    assert p.returncode == 0 and "ok 2, failed 0" in p.stdout, p.stdout + p.stderr
    assert target.stat().st_size == 1 << 20


def test_targets_inside_the_scratch_area_run(tmp_path: Path, run: Any) -> None:
    """Ordinary campaigns are not refused: fio's default files in the run's directory, a
    file the campaign keeps in its scratch area, relative names."""
    for i, opts in enumerate(({}, {"filename": "a.dat:b.dat"}, {"filename": "SHARED"},
                              {"filename_format": "f.$jobnum.$filenum", "nrfiles": 2},
                              {"filename": "../shared.dat"}, {"filename": "/dev/null"})):
        d = tmp_path / f"c{i}"
        (d / "scratch").mkdir(parents=True)
        (d / "scratch" / "shared.dat").write_bytes(b"x" * (1 << 20))
        if opts.get("filename") == "SHARED":
            opts = {"filename": str(d / "scratch" / "shared.dat")}
        camp = campaign(d, opts)
        Campaign.load(camp).preflight()
        if i % 2 == 0:  # and a sample runs for real
            p = run(camp)
            assert p.returncode == 0 and "ok 2, failed 0" in p.stdout, (opts, p.stdout)


def test_a_workdir_climbing_out_to_a_shared_directory_is_not_the_campaigns(
        tmp_path: Path, run: Any) -> None:
    """`workdir: ../shared` is refused when the campaign loads; a scratch directory that is
    a link to a shared directory is somebody's: a file there (outside the run's own
    directory) is refused without allow_destructive, and written with it."""
    shared = tmp_path / "shared"
    shared.mkdir()
    victim = shared / "victim.dat"
    victim.write_bytes(os.urandom(1 << 20))
    before = digest(victim)
    p = run(campaign(tmp_path / "c0", {"filename": "../victim.dat"}, workdir="../shared"))
    assert p.returncode == 2 and "field workdir" in p.stderr, p.stdout + p.stderr
    camp = campaign(tmp_path / "c", {"filename": "../victim.dat"})
    (tmp_path / "c" / "scratch").symlink_to(shared)
    p = run(camp)
    assert p.returncode == 2 and "leads outside the campaign's directory" in p.stderr, \
        p.stdout + p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert digest(victim) == before
    # the scratch area leading out of the campaign's directory needs the sandbox's opt-in
    camp = campaign(tmp_path / "c2", {"filename": "../victim.dat", "allow_destructive": True},
                    sandbox={"allow_destructive": True})
    (tmp_path / "c2" / "scratch").symlink_to(shared)
    p = run(camp)
    assert p.returncode == 0 and "ok 2, failed 0" in p.stdout, p.stdout + p.stderr
    assert digest(victim) != before


# ------------------------------------------------------------------ the runner itself
def test_a_hard_link_in_the_scratch_area_to_a_file_outside_is_refused(
        tmp_path: Path, victim: Path) -> None:
    scratch = tmp_path / "c" / "scratch"
    scratch.mkdir(parents=True)
    os.link(victim, scratch / "innocent.dat")
    r = FioRunner(**FIO)
    with pytest.raises(CampaignError, match="hard links"):
        r.check_target({"filename": "../innocent.dat"}, base=scratch)
    with pytest.raises(CampaignError, match="hard links"):
        r.check_target({"opendir": str(scratch)}, base=scratch)


def test_dev_nodes_to_be_are_refused_but_dev_shm_files_are_not(tmp_path: Path) -> None:
    """A missing name directly on /dev's own file system may become a device node; /dev/shm
    (a tmpfs) holds ordinary files, a common place for quick benchmarks."""
    r = FioRunner(**FIO)
    for cfg in ({"filename": "/dev/storlab-no-such-disk"}, {"filename_format": "/dev/sd$jobnum"},
                {"filename": "/dev/disk/by-id/storlab-none"}):
        with pytest.raises(CampaignError, match="block device"):
            r.check_target(cfg, base=tmp_path)
    if os.path.isdir("/dev/shm") and os.stat("/dev/shm").st_dev != os.stat("/dev").st_dev:
        r.check_target({"filename": "/dev/shm/storlab-bench.dat"}, base=tmp_path)
        r.check_target({"directory": "/dev/shm"}, base=tmp_path)



def test_client_mode_job_file_values_fio_would_read_differently_are_refused(
        tmp_path: Path) -> None:
    r = FioRunner(clients=["127.0.0.1"], **FIO)
    for cfg, word in (({"description": "a;b"}, "comment"),
                      ({"description": "a#b"}, "comment"),
                      ({"filename": "${HOME}/x"}, "expands"),
                      ({"description": "a\nfilename=/dev/sda"}, "control characters"),
                      ({"filename": "relative.dat"}, "client/server"),
                      ({"directory": "/srv"}, "client/server")):
        with pytest.raises(CampaignError, match=word):
            r.check_target(cfg, base=tmp_path, workdir=tmp_path / "c1-r1")
    r.check_target({"directory": str(tmp_path / "c1-r1"),
                    "filename_format": "$jobname.$clientuid"}, base=tmp_path,
                   workdir=tmp_path / "c1-r1")


def test_extra_args_job_files_and_client_options_are_refused() -> None:
    for args in (["job.fio"], ["--eta", "never"], ["--client=h"], ["--", "--filename=x"]):
        with pytest.raises(CampaignError, match="extra_args"):
            FioRunner(extra_args=args)
