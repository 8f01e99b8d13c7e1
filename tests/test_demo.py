"""`make demo` (scripts/demo.sh) creates a block device for fio and removes it however it
ends: here it is interrupted (SIGINT to its process group, as Ctrl-C sends it) while it
measures, and the loop device and its backing file must be gone afterwards."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.skipif(shutil.which("fio") is None or shutil.which("losetup") is None
                       or os.geteuid() != 0, reason="needs root, fio and losetup"),
    pytest.mark.xdist_group("fio")]


def _attached(img: Path) -> str:
    return subprocess.run(["losetup", "-j", str(img)], capture_output=True, text=True).stdout


def test_an_interrupted_demo_removes_its_device(tmp_path: Path) -> None:
    wrapper = tmp_path / "storlab"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m storlab "$@"\n')
    wrapper.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "STORLAB": str(wrapper), "PYTHON": sys.executable,
           "DEMO_SIZE_MB": "64",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.Popen(["bash", str(ROOT / "scripts" / "demo.sh"), str(out)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (out / "noise.db").exists():  # the device is up and fio is measuring
            assert p.poll() is None, p.communicate()[0]
            assert time.monotonic() < deadline, "the demo never started measuring"
            time.sleep(0.2)
        camp = (out / "campaign.yaml").read_text()
        device = re.search(r"filename: (\S+)", camp).group(1)  # type: ignore[union-attr]
        assert device.startswith(("/dev/loop", "/dev/zram"))
        assert "allow_destructive: true" in camp and "direct: 1" in camp
        if device.startswith("/dev/loop"):
            assert device in _attached(out / "disk.img")
        time.sleep(1)
        os.killpg(p.pid, signal.SIGINT)
        text = p.communicate(timeout=120)[0]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode != 0, text
    if device.startswith("/dev/loop"):
        assert f"detached {device}" in text, text
        assert not (out / "disk.img").exists()
        assert str(out) not in subprocess.run(["losetup", "-a"], capture_output=True,
                                              text=True).stdout
    else:
        assert f"removed {device}" in text, text
        assert not Path("/sys/block", Path(device).name).exists()
