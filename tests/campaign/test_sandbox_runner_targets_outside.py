"""A runner's target outside the campaign's directory needs allow_destructive.

A deny-list of the system's trees cannot name every root-owned directory a root-run
script or an interpreter's site-packages lies in: fio's `filename_format` without a token
made a `.pth` file there (run as root at the interpreter's next start), and a `fio:`
program the campaign names got the whole `directory:` writable and rewrote a root-run
script. Real fio and real bwrap; each refusal is one line naming the option.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("fio")
                                or not shutil.which("bwrap"),
                                reason="root, fio and bwrap run the walls for real")


def _campaign(d: Path, options: dict[str, Any], **extra: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "t", "seed": 1, "randomize": False,
            "space": {"factors": [{"name": "bs", "kind": "categorical",
                                   "values": [512, 1024]}]},
            "design": {"configs": [{"bs": 512}]},
            "runner": {"type": "fio", "options": options}, **extra}
    (d / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return d / "campaign.yaml"


def _site_packages(tmp_path: Path) -> Path:
    """A root-owned 0755 site-packages outside the campaign (a venv's, storlab's own)."""
    sp = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    sp.mkdir(parents=True)
    for p in (sp, *sp.parents):
        if p == tmp_path:
            break
        os.chmod(p, 0o755)
    return sp


def test_a_pth_file_named_whole_by_filename_format_is_refused(storlab: Any,
                                                               tmp_path: Path) -> None:
    """`filename_format: <site-packages>/zz.pth` (no token: the campaign picks the whole
    name) with a `buffer_pattern` holding a Python line: refused before any run, nothing
    made; with the runner's allow_destructive the judgement is the operator's."""
    sp = _site_packages(tmp_path)
    line = 'import os; open("/tmp/never", "w") #'
    line = line + "x" * (511 - len(line)) + "\n"
    opts = {"rw": "write", "size": 512, "filename_format": f"{sp}/zz.pth",
            "buffer_pattern": "0x" + line.encode().hex(), "scramble_buffers": 0}
    camp = _campaign(tmp_path / "c", opts)
    r = storlab("run", camp, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "Traceback" not in out, out
    assert len(out.strip().splitlines()) == 1, out
    assert "runner.options.filename_format" in out and str(sp) in out, out
    assert "outside the campaign's directory" in out and "allow_destructive" in out, out
    assert os.listdir(sp) == []
    assert not (tmp_path / "c" / "campaign.db").exists()


def test_the_campaigns_own_fio_gets_no_directory_outside(storlab: Any, tmp_path: Path
                                                         ) -> None:
    """The campaign's own `fio:` program with `directory:` an existing root-owned
    directory outside holding a root-run script: refused before any run (the program
    would get the whole directory writable), the script untouched."""
    app = tmp_path / "app"
    app.mkdir(mode=0o755)
    job = app / "job.sh"
    job.write_text("#!/bin/sh\necho ORIGINAL\n")
    d = tmp_path / "c"
    d.mkdir()
    fake = d / "fakefio"
    fake.write_text("#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in --parse-only|--version|"
                    "--cmdhelp*|--enghelp*) echo fio-3.33; exit 0;; esac; done\n"
                    f"printf 'PWNED\\n' > {job}\necho '{{\"jobs\": []}}'\n")
    fake.chmod(0o755)
    camp = _campaign(d, {"fio": str(fake), "rw": "write", "size": "4k",
                         "directory": str(app)})
    r = storlab("run", camp, timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "Traceback" not in out, out
    assert len(out.strip().splitlines()) == 1, out
    assert "runner.options.directory" in out and str(app) in out, out
    assert "allow_destructive" in out, out
    assert job.read_text() == "#!/bin/sh\necho ORIGINAL\n"


def test_the_walls_open_no_target_directory_outside(tmp_path: Path) -> None:
    """A caller that skips the preflight: the walls bind no runner target directory
    outside the campaign's directory (nor a file not made yet there) without
    allow_destructive; inside it they do, and with allow_destructive outside too."""
    from storlab.campaign.runners._sandbox import Declared, declared, walls_for

    home = tmp_path / "c"
    run = home / "scratch" / "c1-r1"
    run.mkdir(parents=True)
    (home / "data").mkdir()
    sp = _site_packages(tmp_path)
    targets = [str(sp), str(sp / "zz.pth"), str(home / "data")]
    with declared(Declared(homes=(str(home),))):
        w = walls_for(str(run), targets)
        try:
            assert sorted(w.writable) == sorted([str(run), str(home / "data")])
        finally:
            w.close()
        w = walls_for(str(run), targets, allow_destructive=True)
        try:
            assert str(sp) in w.writable
        finally:
            w.close()


@pytest.mark.parametrize("where", ["/run", "/var/run", "/var"])
def test_readable_run_with_unix_sockets_needs_allow_destructive(tmp_path: Path,
                                                                 where: str) -> None:
    """`sandbox.readable: [/run]` with Unix sockets allowed: a root daemon that binds its
    socket there during a run would be reached through the read-only view. Refused
    without allow_destructive, in one line naming the field and the sockets; without Unix
    sockets refused too (as root, a readable place outside the campaign's directory and
    the system's trees needs the opt-in); with the opt-in, it is shown."""
    from storlab.campaign import Campaign
    from storlab.errors import CampaignError

    def camp(d: str, **sb: Any) -> Path:
        return _campaign(tmp_path / d, {"rw": "write", "size": "4k"},
                         sandbox={"readable": [where], **sb})

    with pytest.raises(CampaignError, match=r"sandbox\.readable\[0\].*Unix sockets.*"
                                            r"allow_destructive"):
        Campaign.load(camp("a", unix_sockets=True)).preflight()
    with pytest.raises(CampaignError, match=r"sandbox\.readable\[0\]"):
        Campaign.load(camp("b", io_uring=True)).preflight()
    with pytest.raises(CampaignError, match=r"sandbox\.readable\[0\].*outside the "
                                            r"campaign's directory.*allow_destructive"):
        Campaign.load(camp("c")).preflight()
    Campaign.load(camp("d", unix_sockets=True, allow_destructive=True)).preflight()


@pytest.mark.parametrize("where", ["/run", "/var/run", "/"])
def test_readable_run_with_fios_own_unix_sockets_needs_allow_destructive(
        tmp_path: Path, storlab: Any, where: str) -> None:
    """fio's net engine with `protocol=unix` gets Unix sockets without a declaration:
    `sandbox.readable: [/run]` is then judged as with `sandbox.unix_sockets` declared
    (a root daemon binding its socket there during a run would be reached through the
    read-only view, by fio's own client): refused before any run, one line naming the
    field, exit 2, nothing run (as root by the rule for every place outside the campaign's
    directory, which the preflight applies first; fio's option is named by the runner's
    own check, below). The opt-in, or a system tree shown anyway: no refusal."""
    from storlab.campaign import Campaign

    unix = {"ioengine": "net", "protocol": "unix", "filename": "fio.sock", "rw": "write",
            "size": "4k"}
    camp = _campaign(tmp_path / "a", unix, sandbox={"readable": [where]})
    r = storlab("run", camp, timeout=120)
    err = r.stderr.strip()
    assert r.returncode == 2 and len(err.splitlines()) == 1, r.stdout + r.stderr
    assert "sandbox.readable[0]" in err and "outside the campaign's directory" in err, err
    assert "allow_destructive" in err and "Traceback" not in err, err
    assert not (camp.parent / "scratch").exists()  # no run started
    # the protocol a factor's value picks, per configuration: judged for each
    spec = yaml.safe_load(camp.read_text())
    spec["space"]["factors"].append({"name": "protocol", "kind": "categorical",
                                     "values": ["tcp", "unix"]})
    spec["design"] = {"configs": [{"bs": 512, "protocol": "tcp"},
                                  {"bs": 512, "protocol": "unix"}]}
    camp.write_text(yaml.safe_dump(spec, sort_keys=False))
    r = storlab("run", camp, timeout=120)
    assert r.returncode == 2 and "sandbox.readable[0]" in r.stderr, r.stdout + r.stderr
    # a system tree shown anyway, or the opt-in: shown
    Campaign.load(_campaign(tmp_path / "c", unix, sandbox={"readable": ["/usr/share"]})
                  ).preflight()
    Campaign.load(_campaign(tmp_path / "d", unix, sandbox={
        "readable": [where], "allow_destructive": True})).preflight()


def test_the_fio_runner_refuses_readable_run_with_its_unix_sockets_at_the_run(
        tmp_path: Path) -> None:
    """The runner itself, called past the campaign's preflight with `/run` readable and no
    declaration, refuses a `protocol=unix` job before fio starts."""
    from storlab.campaign.runners import make_runner
    from storlab.campaign.runners._sandbox import Declared, declared
    from storlab.errors import CampaignError

    home = tmp_path / "c"
    (home / "scratch").mkdir(parents=True)
    runner = make_runner("fio", {"ioengine": "net", "protocol": "unix",
                                 "filename": "fio.sock", "rw": "write", "size": "4k"})
    with declared(Declared(homes=(str(home),), readable=("/run",))):
        with pytest.raises(CampaignError, match=r"/run.*protocol=unix.*allow_destructive"):
            runner.run({"bs": "4k"}, home / "scratch" / "c1-r1")
    assert not (home / "scratch" / "c1-r1" / "fio.sock").exists()


def test_the_fio_runner_refuses_a_target_outside_at_the_run(tmp_path: Path) -> None:
    """The runner itself, called past the campaign's preflight, refuses a `directory:`
    outside the campaign's directory before fio starts (nothing made there)."""
    from storlab.campaign.runners import make_runner
    from storlab.campaign.runners._sandbox import Declared, declared
    from storlab.errors import CampaignError

    home = tmp_path / "c"
    (home / "scratch").mkdir(parents=True)
    app = tmp_path / "app"
    app.mkdir()
    runner = make_runner("fio", {"rw": "write", "size": "4k", "directory": str(app)})
    with declared(Declared(homes=(str(home),))):
        with pytest.raises(CampaignError, match="outside the campaign's directory"):
            runner.run({"bs": "4k"}, home / "scratch" / "c1-r1")
    assert os.listdir(app) == []
