"""Helpers the campaign tests share."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


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
