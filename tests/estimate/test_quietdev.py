"""The quiet device for accuracy figures: a real zram (or loop) device with ext4, usable by
fio, and gone afterwards, also when the body fails."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from storlab.estimate.quietdev import QuietDeviceError, quiet_device

needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mkfs.ext4") is None,
                                reason="needs root and mkfs.ext4")


def _mounted(path: Path) -> bool:
    return any(line.split()[1] == str(path) for line in Path("/proc/mounts").read_text()
               .splitlines())


@needs_root
@pytest.mark.parametrize("kind", ["zram", "loop"])
def test_made_used_and_removed(kind, tmp_path) -> None:
    try:
        with quiet_device("256m", (kind,)) as q:
            assert q.kind == kind and _mounted(q.mountpoint)
            (q.mountpoint / "x").write_bytes(b"1" * 4096)
            dev, mnt = q.device, q.mountpoint
            raise RuntimeError("the body fails")
    except QuietDeviceError as exc:
        pytest.skip(f"no {kind} here: {exc}")
    except RuntimeError:
        pass
    assert not _mounted(mnt) and not mnt.exists()
    if kind == "zram":
        assert not Path(f"/sys/block/{dev.name}").exists()
    else:  # detached (the number may be reused by someone else, but not with our file)
        backing = Path(f"/sys/block/{dev.name}/loop/backing_file")
        assert not backing.exists() or "storlab-quiet-" not in backing.read_text()


@needs_root
def test_a_busy_mount_point_is_refused(tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(QuietDeviceError, match="in use or not empty"):
        with quiet_device("256m", ("loop",), mountpoint=tmp_path):
            pass
    assert (tmp_path / "file").read_text() == "x"
