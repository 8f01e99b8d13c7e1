"""fio's implicit grants (io_uring rings, Unix sockets) go to the system's fio only: a
campaign naming its own program in `fio:` is refused before any run unless it declares
the grant (real CLI, a fake fio that would tell if it ran)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.xdist_group("fio")]


@pytest.mark.parametrize("engine", [{"ioengine": "io_uring"},
                                    {"ioengine": "net", "protocol": "unix"}])
def test_a_campaigns_own_fio_gets_no_implicit_grant(tmp_path: Path, storlab: Any,
                                                     engine: dict[str, str]) -> None:
    camp = tmp_path / "c"
    camp.mkdir()
    fake = camp / "fakefio"
    python = shutil.which("python3", path="/usr/bin") or sys.executable
    fake.write_text(f"#!{python}\nopen({str(tmp_path / 'RAN')!r}, 'w').close()\n")
    fake.chmod(0o755)

    def run(**sandbox: Any) -> Any:
        spec = {"name": "u", "timeout": 30, "space": {"factors": [
                    {"name": "iodepth", "kind": "categorical", "values": [1, 2]}],
                    "responses": [{"name": "write_iops", "goal": "maximize"}]},
                "design": {"configs": [{"iodepth": 1}]}, "sandbox": sandbox,
                "runner": {"type": "fio", "options": {
                    "fio": str(fake), "rw": "write", "bs": "4k", "size": "4k",
                    "filename": "f.dat", **engine}}}
        (camp / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        return storlab("run", str(camp / "campaign.yaml"), timeout=120)

    r = run()
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stdout + r.stderr
    assert "not the system's fio" in r.stderr, r.stderr
    assert not (tmp_path / "RAN").exists()
    declared = ({"io_uring": True} if engine["ioengine"] == "io_uring"
                else {"sockets": [str(camp / "s.sock")]})
    r = run(**declared)
    assert "not the system's fio" not in r.stdout + r.stderr, r.stdout + r.stderr


def test_the_system_fio_keeps_its_grant() -> None:
    from storlab.campaign.runners.fio import FioRunner

    if shutil.which("fio") is None or not FioRunner().system_fio():
        pytest.skip("no fio under /usr")
    f = FioRunner(ioengine="io_uring", rw="read")
    assert f.refused_grant(f.options, sockets=False, io_uring=False) is None


def test_the_verdict_is_looked_up_once_per_runner_and_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asked before the campaign and before each run: resolved once, again only when PATH
    changes (the campaign's own fio placed first on it loses the grant on the same
    runner)."""
    from storlab.campaign.runners.fio import FioRunner

    if shutil.which("fio") is None or not FioRunner().system_fio():
        pytest.skip("no fio under /usr")
    f = FioRunner(ioengine="io_uring", rw="read")
    lookups: list[str] = []
    which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: lookups.append(name)
                        or which(name, *a, **k))
    for _ in range(5):
        assert f.refused_grant(f.options, sockets=False, io_uring=False) is None
    assert lookups == ["fio"]
    own = tmp_path / "fio"
    own.write_text("#!/bin/sh\nexit 0\n")
    own.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert "not the system's fio" in (f.refused_grant(f.options, sockets=False,
                                                      io_uring=False) or "")
    assert f.refused_grant(f.options, sockets=False, io_uring=True) is None
    assert lookups == ["fio", "fio"]


def test_a_link_on_path_swapped_after_the_check_is_not_what_runs(tmp_path: Path) -> None:
    """The verdict is remembered per `fio` and PATH, and fio was started by its name: a
    link on PATH swapped to another program after the check ran that program with the
    grants the system's fio gets. Now the runs start the file the check passed (its real
    path): the program swapped in never runs."""
    from storlab.campaign.runners.fio import FioRunner

    system = shutil.which("fio")
    if system is None or not FioRunner().system_fio():
        pytest.skip("no fio under /usr")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "fio").symlink_to(os.path.realpath(system))
    fake = tmp_path / "fakefio"
    fake.write_text("#!/bin/sh\necho FAKE-FIO-RAN >&2\nexit 1\n")
    fake.chmod(0o755)
    mp = pytest.MonkeyPatch()
    mp.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    try:
        f = FioRunner(ioengine="psync", rw="write", bs="4k", size="64k")
        assert f.system_fio()
        (bindir / "fio").unlink()
        (bindir / "fio").symlink_to(fake)  # swapped after the check
        res = f.run({}, tmp_path / "run")
    finally:
        mp.undo()
    assert "FAKE-FIO-RAN" not in res.stderr and res.status == "ok", res.stderr
