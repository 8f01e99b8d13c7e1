"""Helpers the campaign tests share."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml


@pytest.fixture
def loopdev() -> Iterator[str]:
    """A real 4 MiB loop device over random bytes in a tmp directory, detached after; the
    test is skipped when losetup is unavailable or cannot attach one here."""
    size = 4 << 20
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("needs root and losetup")
    d = Path(tempfile.mkdtemp(prefix="storlab-loop-", dir="/tmp"))
    backing = d / "disk.img"
    backing.write_bytes(os.urandom(size))
    p = subprocess.run(["losetup", "-f", "--show", str(backing)], capture_output=True,
                       text=True)
    if p.returncode != 0:
        shutil.rmtree(d)
        pytest.skip(f"losetup failed: {p.stderr.strip()}")
    dev = p.stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """An existing 2 MiB file outside the campaign (a test's campaign lives below
    tmp_path), whose bytes the guard and sandbox tests compare before and after."""
    v = tmp_path / "victim.dat"
    v.write_bytes(os.urandom(2 << 20))
    return v


def _command_campaign(d: Path, argv: list[str], timeout: float = 60, **sandbox: Any) -> Path:
    """A one-run command campaign in `d` running `argv`, with `sandbox` declared."""
    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "g", "timeout": timeout, "space": {"factors": [
                {"name": "n", "kind": "categorical", "values": ["a", "b"]}],
                "responses": [{"name": "y", "goal": "maximize"}]},
            "design": {"configs": [{"n": "a"}]},
            "runner": {"type": "command", "options": {"command": argv,
                                                      "json_metrics": {"y": "y"}}},
            "sandbox": sandbox}
    (d / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return d / "campaign.yaml"


def _program_got(storlab: Any, camp: Path) -> Any:
    """Run a `_command_campaign` with the CLI; the `got` its program printed last."""
    r = storlab("run", str(camp), timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    outs = list((camp.parent / "campaign.db.output").glob("*.stdout"))
    assert len(outs) == 1, outs
    lines = [ln for ln in outs[0].read_text().splitlines() if ln.startswith("{")]
    assert lines, outs[0].read_text() + outs[0].with_suffix(".stderr").read_text()
    return json.loads(lines[-1])["got"]


@pytest.fixture
def command_campaign() -> Callable[..., Path]:
    """`command_campaign(dir, argv, timeout=60, **sandbox)`: a one-run command campaign."""
    return _command_campaign


@pytest.fixture
def program_got(storlab: Any) -> Callable[[Path], Any]:
    """`program_got(campaign)`: run it with the CLI; what its program reported as `got`."""
    return lambda camp: _program_got(storlab, camp)


@pytest.fixture
def tls_dask_cluster(tmp_path_factory: pytest.TempPathFactory,
                     monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A user's own Dask cluster as docs/clusters.md starts one: mutual TLS, its CA and the
    client's certificate given to storlab through Dask's TLS environment variables (plain
    TCP is refused as root). Yields the LocalCluster."""
    from distributed import LocalCluster
    from distributed.security import Security

    from storlab.clusters.dask_tls import client_env, write_credentials

    sec = Security.temporary()
    d = tmp_path_factory.mktemp("dask-tls")
    d.chmod(0o700)
    for k, v in client_env(write_credentials(sec, d)).items():
        monkeypatch.setenv(k, v)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, protocol="tls",
                      host="127.0.0.1", security=sec, dashboard_address=None) as cluster:
        yield cluster
