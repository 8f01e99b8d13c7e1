"""`sandbox.readable` for a storlab run as root, without `allow_destructive`: a place
must lie (links resolved) inside the campaign's directory or in one of the system's trees
the walls show anyway (/usr, /etc: a no-op). A deny-list of root-only places let `/`
(`//`, `/.`, `/root/..`) show /root and /home whole, `/var` cron's crontabs and
/var/backups, and `/var/lib` with Unix sockets a root daemon's socket bound during the
run. Each refused before any run in one line naming the field, the place and the way out,
exit 2; the walls judge the place again on the descriptor they bind (a link swapped in
after the check). A storlab not run as root keeps the kernel's permissions as its rule;
`allow_destructive` shows what is declared. Real CLI, real bwrap."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the rule is root's)")]


def campaign(d: Path, sandbox: dict[str, Any], code: str = "") -> Path:
    """A one-run command campaign whose program runs `code`, then prints its metric."""
    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "readable", "seed": 1, "randomize": False,
            "space": {"factors": [{"name": "n", "kind": "categorical", "values": ["a", "b"]}]},
            "design": {"configs": [{"n": "a"}]},
            "runner": {"type": "command", "options": {
                "command": [sys.executable, "-c",
                            code + "\nimport json; print(json.dumps({'y': 1}))"],
                "json_metrics": {"y": "y"}}},
            "sandbox": sandbox}
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


@pytest.fixture
def secret() -> Any:
    """A root-only file in /root (0600 in a 0700 directory)."""
    d = Path(tempfile.mkdtemp(prefix="storlab-test-", dir="/root"))
    f = d / "secret"
    f.write_text("ROOT-ONLY\n")
    f.chmod(0o600)
    yield f
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("place,sb", [
    ("/", {"network": True}), ("//", {}), ("/.", {}), ("/root/..", {"network": True}),
    ("/var", {}), ("/var/lib", {"unix_sockets": True}), ("/home", {}), ("/srv", {}),
    ("/mnt", {})])
def test_a_readable_place_outside_the_campaign_is_refused_before_any_run(
        tmp_path: Path, storlab: Any, place: str, sb: dict[str, Any]) -> None:
    camp = campaign(tmp_path / "c", {"readable": [place], **sb})
    r = storlab("run", camp, "-q", timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stdout, r.stderr)
    for w in ("field sandbox.readable[0]", str(Path(place)), "sandbox.allow_destructive: true",
              "into the campaign's directory"):
        assert w in lines[0], (w, lines[0])
    assert not (camp.parent / "scratch").exists()  # nothing ran


def test_roots_files_under_slash_stay_unread_and_the_opt_in_shows_them(
        tmp_path: Path, storlab: Any, secret: Path) -> None:
    """`readable: [/]` read /root's files (and sent them away with the network): refused;
    with `allow_destructive: true` shown as declared (the operator's own campaign)."""
    code = f"print(open({str(secret)!r}).read().strip())"
    r = storlab("run", campaign(tmp_path / "a", {"readable": ["/"], "network": True}, code),
                "-q", timeout=120)
    assert r.returncode == 2 and "ROOT-ONLY" not in r.stdout + r.stderr, r.stderr
    camp = campaign(tmp_path / "b", {"readable": ["/"], "allow_destructive": True}, code)
    r = storlab("run", camp, "-q", timeout=120)
    assert r.returncode == 0, r.stderr  # the program read it (else it fails: exit 1)


def test_the_campaigns_own_places_and_the_system_trees_need_nothing(
        tmp_path: Path, storlab: Any) -> None:
    """A place inside the campaign's directory (and a link there into /usr), and a place in
    a system tree shown anyway (/usr/share, /etc/ssl: no-ops), run without the opt-in; the
    program reads them."""
    d = tmp_path / "c"
    (d / "inputs").mkdir(parents=True)
    (d / "inputs" / "x.txt").write_text("mine\n")
    (d / "share").symlink_to("/usr/share")
    code = (f"assert open({str(d / 'inputs' / 'x.txt')!r}).read() == 'mine\\n'\n"
            "import os; assert os.path.isdir('/usr/share/doc')")
    camp = campaign(d, {"readable": ["inputs", "share", "/usr/share", "/etc/ssl"]}, code)
    r = storlab("run", camp, "-q", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_link_inside_the_campaign_leading_outside_is_refused(
        tmp_path: Path, storlab: Any, secret: Path) -> None:
    """`readable: [data]` where data is a link to /root/...: what it leads to is judged."""
    d = tmp_path / "c"
    d.mkdir()
    (d / "data").symlink_to(secret.parent)
    r = storlab("run", campaign(d, {"readable": ["data"], "network": True}), "-q",
                timeout=120)
    assert r.returncode == 2 and "sandbox.readable[0]" in r.stderr, r.stderr
    assert str(secret.parent) in r.stderr and "outside the campaign" in r.stderr, r.stderr


def test_the_walls_judge_the_place_again_on_the_descriptor(tmp_path: Path,
                                                           secret: Path) -> None:
    """Past the campaign's check (a link swapped in after it, here at once): the run's
    walls judge where the descriptor they bind leads and refuse the run, the program
    never started; a place inside the campaign's directory is shown."""
    from storlab.campaign.task import RunTask, execute_task

    camp = tmp_path / "camp"
    (camp / "scratch").mkdir(parents=True)
    (camp / "data").mkdir()
    (camp / "data" / "secret").write_text("ok\n")
    code = (f"print(open({str(camp / 'data' / 'secret')!r}).read().strip())\n"
            "import json; print(json.dumps({'y': 1}))")

    def run(key: str) -> Any:
        t = RunTask(key=key, config={}, runner_type="command",
                    runner_options={"command": [sys.executable, "-c", code],
                                    "json_metrics": {"y": "y"}}, values={},
                    workdir=str(camp / "scratch" / key), timeout=60, homes=[str(camp)],
                    readable=[str(camp / "data")])
        return execute_task(t).result

    res = run("c1-r1")
    assert res.status == "ok" and "ok" in res.raw, res.stderr
    shutil.rmtree(camp / "data")
    (camp / "data").symlink_to(secret.parent)
    res = run("c2-r1")
    assert res.status == "failed", (res.raw, res.stderr)
    assert "sandbox.readable" in res.stderr and str(secret.parent) in res.stderr, res.stderr
    assert "ROOT-ONLY" not in res.raw + res.stderr


def test_a_storlab_not_run_as_root_keeps_the_kernels_permissions(as_nobody: Any) -> None:
    """Run by a user, the programs read only what that user may: `/` or /var need no
    opt-in; /run with Unix sockets still does (a daemon's socket bound there during a
    run)."""
    from storlab.campaign.runners import refused_readable

    said = as_nobody(lambda: refused_readable(["/", "/var", "/var/lib"], True, False))
    assert said == "None", said
    said = as_nobody(lambda: refused_readable(["/run"], False, False, True))
    assert said != "None" and "Unix sockets" in said, said
    # as root the same places are refused
    assert refused_readable(["/"], True, False) is not None


def test_a_runners_own_allow_destructive_does_not_open_the_campaigns_readable(
        tmp_path: Path, secret: Path) -> None:
    """fio's `allow_destructive` (its block device) is about its targets: the walls still
    judge the campaign's `readable` place, swapped for a link to /root past the check,
    unless the campaign itself says `sandbox.allow_destructive`."""
    from storlab.campaign.runners._sandbox import Declared, declared, walls_for
    from storlab.errors import CampaignError

    camp = tmp_path / "camp"
    run = camp / "scratch" / "c1-r1"
    run.mkdir(parents=True)
    (camp / "data").symlink_to(secret.parent)
    decl = Declared(homes=(str(camp),), readable=(str(camp / "data"),))
    with declared(decl), pytest.raises(CampaignError, match=r"sandbox\.readable"):
        walls_for(str(run), allow_destructive=True).close()
    from dataclasses import replace
    with declared(replace(decl, allow_destructive=True)):
        w = walls_for(str(run))
        try:
            assert str(secret.parent) in [p for _, p in w.readonly]
        finally:
            w.close()
