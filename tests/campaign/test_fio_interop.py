"""storlab with the fio tools storage people already use (issue 15), against the real fio:
an existing .fio job file as the base job (factors override it; the target guard checks
what the file names), fio's own metric names beside storlab's, and each run's fio JSON
written by `storlab results --fio-json` as fio-plot reads it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.campaign import Campaign
from storlab.campaign.runners.fio import FioRunner
from storlab.campaign.runners.fio_cmdline import read_job_file
from storlab.campaign.runners.fio_parse import FIO_NAMED
from storlab.campaign.spec import CampaignError

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")

JOB = """; a job file as people keep them
[global]
ioengine=psync
size=2M
runtime=1
time_based
# bs is a factor of the campaign below; this value is overridden
bs=64k

[randread-job]
rw=randread   ; inline comment
"""


def campaign(d: Path, job: str, factors: list[dict[str, Any]] | None = None,
             options: dict[str, Any] | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "base.fio").write_text(job)
    spec = {"name": "t", "seed": 1, "timeout": 60, "repetitions": 1,
            "space": {"factors": factors or [
                {"name": "bs", "kind": "categorical", "values": ["4k", "16k"]}]},
            "design": {"kind": "full"},
            "runner": {"type": "fio", "options": {"job_file": "base.fio", **(options or {})}}}
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def test_job_file_is_read_as_fio_reads_it(tmp_path: Path) -> None:
    (tmp_path / "j.fio").write_text(JOB)
    assert read_job_file(tmp_path / "j.fio") == {
        "ioengine": "psync", "size": "2M", "runtime": "1", "time_based": "1", "bs": "64k",
        "rw": "randread"}
    for text, says in [("[a]\nrw=read\n[b]\nrw=write\n", "second job"),
                       ("[a]\ninclude other.fio\n", "include"),
                       ("rw=read\n", "before any"),
                       ("[a]\nfilename=${HOME}/x\n", "expands"),
                       ("[a]\nname=other\n", "job_name"),
                       ("[a]\noutput=/tmp/x\n", "command-line")]:
        (tmp_path / "bad.fio").write_text(text)
        with pytest.raises(CampaignError, match=says):
            read_job_file(tmp_path / "bad.fio")


def test_a_job_file_that_is_no_regular_file_is_refused_in_one_line(tmp_path: Path,
                                                                    storlab: Any) -> None:
    """A job_file naming a directory printed `error: 3: Is a directory`; a FIFO or a
    device (a watchdog, a tape) must never be opened for reading: each is looked at
    through an O_PATH descriptor first and refused in one line naming the file."""
    p = campaign(tmp_path / "c", JOB)
    (tmp_path / "c" / "base.fio").unlink()
    (tmp_path / "c" / "base.fio").mkdir()
    r = storlab("run", str(p), timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "base.fio: not a regular file" in r.stderr, r.stderr
    os.mkfifo(tmp_path / "c" / "fifo.fio")
    nodes = [tmp_path / "c" / "fifo.fio"]
    try:  # a character device node (1, 3: the null device), where the test may make one
        os.mknod(tmp_path / "c" / "dev.fio", 0o600 | __import__("stat").S_IFCHR,
                 os.makedev(1, 3))
        nodes.append(tmp_path / "c" / "dev.fio")
    except PermissionError:
        pass
    for node in nodes:
        with pytest.raises(CampaignError, match=f"{node.name}: not a regular file"):
            read_job_file(node, home=tmp_path / "c")


def test_campaign_runs_the_job_file_with_factors_overriding_it(tmp_path: Path,
                                                               storlab: Any) -> None:
    camp = campaign(tmp_path / "c", JOB)
    r = storlab("run", camp, "--quiet")
    assert r.returncode == 0, r.stderr
    df = Campaign.load(camp).results("run")
    assert len(df) == 2 and (df["status"] == "ok").all()
    # the factor won over the job file's bs=64k; the job file's rw=randread held
    for _, row in df.iterrows():
        bs = 4096 if row["bs"] == "4k" else 16384
        assert row["read_bw_bytes"] == pytest.approx(row["read_iops"] * bs, rel=0.05)
        assert row["write_iops"] == 0
        # fio's own names beside storlab's, in fio's units
        assert row["fio.read.iops"] == pytest.approx(row["read_iops"])
        assert row["fio.read.bw"] == pytest.approx(row["read_bw_bytes"] / 1024, rel=0.01)
        assert row["fio.read.clat_ns.percentile.99.000000"] == pytest.approx(
            row["read_clat_p99_us"] * 1000)
    assert set(FIO_NAMED) <= set(df.columns)
    # each run's fio JSON, written beside the store as the run finished (campaign.db ->
    # campaign-fio/c<config>-r<repetition>.json), the same document --fio-json exports
    beside = sorted((camp.parent / "campaign-fio").glob("*.json"))
    assert [f.name for f in beside] == ["c1-r1.json", "c2-r1.json"]
    # private as the store (0600 in a 0700 directory); the export below 0600 too
    assert {f.stat().st_mode & 0o777 for f in beside} == {0o600}
    assert (camp.parent / "campaign-fio").stat().st_mode & 0o777 == 0o700
    # every run's fio JSON, as fio-plot reads a directory of them
    out = tmp_path / "fio-json"
    r = storlab("results", camp, "-o", tmp_path / "r.csv", "--fio-json", out)
    assert r.returncode == 0, r.stderr
    files = sorted(out.glob("*.json"))
    assert [f.name for f in files] == ["c1-r1.json", "c2-r1.json"]
    # what a run printed (a root-only file read inside the walls) stays private: 0600
    # whatever the umask (it gave 0644, readable by every local user)
    assert {f.stat().st_mode & 0o777 for f in files} == {0o600}
    for f in files:
        doc = json.loads(f.read_text())
        opts = doc["jobs"][0]["job options"]
        assert opts["rw"] == "randread" and opts["bs"] in ("4k", "16k")
        assert doc["jobs"][0]["read"]["iops"] > 0
        assert json.loads((camp.parent / "campaign-fio" / f.name).read_text()) == doc


def test_job_file_edit_is_another_measurement(tmp_path: Path, storlab: Any) -> None:
    camp = campaign(tmp_path / "c", JOB)
    assert storlab("run", camp, "--quiet").returncode == 0
    (camp.parent / "base.fio").write_text(JOB.replace("runtime=1", "runtime=2"))
    r = storlab("run", camp, "--quiet")
    assert r.returncode == 2 and "other settings" in r.stderr, r.stderr


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.parametrize("line", [
    "filename={victim}",
    "directory={victim_dir}\nfilename={victim_name}",
    "filename_format={victim}",
    "opendir={victim_dir}",
    "write_iolog={victim}",
    "filenam={victim}",          # an abbreviation fio would accept
    "filename=/dev/null:{victim}",
    "write_bw_log={victim_dir}/victim",   # fio writes <prefix>_bw.1.log
    "write_lat_log={victim_dir}/victim",
])
def test_guard_checks_what_the_job_file_names(tmp_path: Path, line: str, storlab: Any) -> None:
    victim = tmp_path / ("victim_bw.1.log" if "_log" in line else "victim.dat")
    if "lat_log" in line:
        victim = tmp_path / "victim_clat.1.log"
    victim.write_bytes(os.urandom(1 << 20))
    before = _digest(victim)
    job = "[global]\nioengine=psync\nsize=1M\nrw=write\n[w]\n" + line.format(
        victim=victim, victim_dir=tmp_path, victim_name=victim.name) + "\n"
    camp = campaign(tmp_path / "c", job)
    with pytest.raises(CampaignError, match="outside the campaign|abbreviation"):
        Campaign.load(camp).preflight()
    r = storlab("run", camp)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert not (camp.parent / "scratch").exists()
    assert _digest(victim) == before


def test_runner_options_override_the_job_file(tmp_path: Path) -> None:
    (tmp_path / "j.fio").write_text(JOB)
    runner = FioRunner(job_file=tmp_path / "j.fio", rw="read")
    opts = runner.job_options({"bs": "8k"}, tmp_path)
    assert opts["rw"] == "read" and opts["bs"] == "8k" and opts["ioengine"] == "psync"


def test_campaign_reads_the_job_file_once_into_plain_options(tmp_path: Path) -> None:
    # workers (a Dask host elsewhere) get options, not a path they may not have
    camp = campaign(tmp_path / "c", JOB, options={"runtime": 2})
    c = Campaign.load(camp)
    opts = c.runner_options()
    assert "job_file" not in opts
    assert opts["rw"] == "randread" and opts["runtime"] == 2 and opts["time_based"] == "1"
    (camp.parent / "base.fio").write_text(JOB.replace("randread", "randwrite"))
    assert c.runner_options()["rw"] == "randread"  # this invocation keeps what it checked
    (camp.parent / "base.fio").write_text("[a]\ninclude x.fio\n")
    with pytest.raises(CampaignError, match="include"):
        Campaign.load(camp).preflight()


def test_a_changed_argument_of_a_long_command_is_named(tmp_path: Path, storlab: Any) -> None:
    """The refusal names the argument that changed; it used to cut the whole command list
    at 300 characters, before the change."""
    prog = "import sys; " + " ".join(["pass;"] * 80) + " print('t', 1)"
    camp = tmp_path / "c.yaml"
    text = (f"space:\n  factors:\n    - {{name: a, kind: integer, values: [1, 2]}}\n"
            f"design: {{kind: full}}\nrunner:\n  type: command\n  options:\n"
            f"    command: [{sys.executable}, -c, \"{prog}\", count=32M]\n"
            f"    regex_metrics: ['t (?P<t>[\\d.]+)']\n")
    camp.write_text(text)
    assert storlab("run", camp, "--quiet").returncode == 0
    camp.write_text(text.replace("count=32M", "count=16M"))
    r = storlab("run", camp, "--quiet")
    assert r.returncode == 2 and "other settings" in r.stderr, r.stderr
    assert "'count=32M' -> 'count=16M'" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
