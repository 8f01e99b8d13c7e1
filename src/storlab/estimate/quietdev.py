"""A quiet, memory-backed block device with ext4 on it, for accuracy figures that measure
the model rather than a disk's noise (DESIGN.md: "Accuracy is measured where noise cannot
hide the model's error").

zram first (a compressed RAM block device, `/sys/class/zram-control/hot_add`), else a loop
device on a file in /dev/shm (tmpfs). Both need root. The device, the file system and the
mount point are removed on exit, whatever happened inside.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import QuietDeviceError
from ..units import parse_size


@dataclass(frozen=True)
class QuietDevice:
    kind: str  # "zram" | "loop"
    device: Path
    mountpoint: Path

    def describe(self) -> str:
        what = {"zram": "zram (compressed RAM block device)",
                "loop": "loop device on a file in /dev/shm (tmpfs)"}[self.kind]
        return f"{what} {self.device}, ext4, mounted on {self.mountpoint}"


def _run(argv: list[str]) -> str:
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                        stdin=subprocess.DEVNULL, start_new_session=True)
    if cp.returncode != 0:
        msg = (cp.stderr or cp.stdout).strip().splitlines()
        raise QuietDeviceError(f"{' '.join(argv)}: {msg[-1] if msg else f'exit {cp.returncode}'}")
    return cp.stdout


def _zram(stack: ExitStack, size: int) -> Path:
    ctl = Path("/sys/class/zram-control/hot_add")
    if not ctl.exists():
        raise QuietDeviceError("no zram (the zram module is not loaded: modprobe zram)")
    try:
        n = int(ctl.read_text().strip())  # reading hot_add creates /dev/zram<n>
    except OSError as exc:
        raise QuietDeviceError(f"zram hot_add: {exc.strerror}") from None
    stack.callback(_write, Path("/sys/class/zram-control/hot_remove"), str(n))
    _write(Path(f"/sys/block/zram{n}/disksize"), str(size))
    return Path(f"/dev/zram{n}")


def _loop(stack: ExitStack, size: int) -> Path:
    if shutil.which("losetup") is None:
        raise QuietDeviceError("no losetup")
    fd, name = tempfile.mkstemp(prefix="storlab-quiet-", suffix=".img", dir="/dev/shm")
    os.close(fd)
    stack.callback(os.unlink, name)
    os.truncate(name, size)
    dev = Path(_run(["losetup", "-f", "--show", name]).strip())
    stack.callback(_run, ["losetup", "-d", str(dev)])
    return dev


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:
        raise QuietDeviceError(f"{path}: {exc.strerror}") from None


@contextmanager
def quiet_device(size: str | int = "1g", kinds: tuple[str, ...] = ("zram", "loop"),
                 mountpoint: str | Path | None = None) -> Iterator[QuietDevice]:
    """A fresh ext4 file system on a memory-backed device, mounted on a new temporary
    directory or on `mountpoint` (an empty directory, created if missing: a fixed path
    keeps a campaign's target the same when it is resumed); raises QuietDeviceError with
    every reason when none of `kinds` can be made."""
    if os.geteuid() != 0:
        raise QuietDeviceError("a quiet device needs root (zram or loop device, mount)")
    for tool in ("mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            raise QuietDeviceError(f"{tool} is not installed")
    nbytes = parse_size(size, "quiet device size")
    reasons = []
    for kind in kinds:
        stack = ExitStack()
        try:
            dev = (_zram if kind == "zram" else _loop)(stack, nbytes)
            _run(["mkfs.ext4", "-q", "-F", "-E", "nodiscard", str(dev)])
            if mountpoint is None:
                mnt = Path(tempfile.mkdtemp(prefix=f"storlab-{kind}-"))
            else:
                mnt = Path(mountpoint)
                mnt.mkdir(parents=True, exist_ok=True)
                if os.path.ismount(mnt) or any(mnt.iterdir()):
                    raise QuietDeviceError(f"mount point {mnt} is in use or not empty")
            stack.callback(os.rmdir, mnt)
            _run(["mount", str(dev), str(mnt)])
            stack.callback(_run, ["umount", str(mnt)])
        except QuietDeviceError as exc:
            stack.close()
            reasons.append(f"{kind}: {exc}")
            continue
        with stack:
            yield QuietDevice(kind, dev, mnt)
        return
    raise QuietDeviceError("no quiet device: " + "; ".join(reasons))
