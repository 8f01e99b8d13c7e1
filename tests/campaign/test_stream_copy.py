"""The copy of a sandboxed program's stdout/stderr pipes into its stream files (`_Pump`,
`_copy_some`), on real pipes, files and devices."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from storlab.campaign.runners import _program
from storlab.campaign.runners._program import STREAM_GRACE, _copy_some, _Pump


def test_the_copy_goes_on_where_splice_is_refused(tmp_path: Path) -> None:
    """splice gives EINVAL for an O_APPEND file (as on a file system without splice): the
    copy through memory raised BlockingIOError once the pipe was empty, which the pump took
    for a full file and dropped the rest of the stream. Now it waits for more, and the
    file gets the whole stream."""
    r, w = os.pipe2(os.O_NONBLOCK)
    f = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        with pytest.raises(OSError) as got:  # the kernel's refusal the fallback is for
            os.splice(r, f, 1)
        assert got.value.errno == 22
        os.write(w, b"abc")
        assert _copy_some(r, f) is True
        plain: set[int] = set()  # the pump's memory of the refusal: splice not tried again
        os.write(w, b"def")
        assert _copy_some(r, f, plain) is True and plain == {f}
        os.write(w, b"ghi")
        os.close(w)
        assert _copy_some(r, f, plain) is False
        assert (tmp_path / "out").read_bytes() == b"abcdefghi"
    finally:
        os.close(r)
        os.close(f)


def test_a_stream_never_empty_cannot_hold_the_copy_past_its_grace() -> None:
    """A pipe kept full held `_copy_some` in its loop for good, so `finish()` waited past
    `STREAM_GRACE`. /dev/zero (always readable, no splice to /dev/null) stands for it:
    each call returns after a bounded amount, and `finish()` within the grace."""
    zero = os.open("/dev/zero", os.O_RDONLY)
    null = os.open("/dev/null", os.O_WRONLY)
    try:
        done: list[bool] = []
        t = threading.Thread(target=lambda: done.append(_copy_some(zero, null)), daemon=True)
        t.start()
        t.join(10)
        assert done == [True]
        pump = _Pump([(os.dup(zero), null)])
        pump.start()
        time.sleep(0.2)
        begin = time.monotonic()
        t = threading.Thread(target=pump.finish, daemon=True)
        t.start()
        t.join(STREAM_GRACE + 5)
        assert not t.is_alive() and time.monotonic() - begin < STREAM_GRACE + 2
    finally:
        os.close(zero)
        os.close(null)


def open_fds() -> dict[str, str]:
    """This process's descriptors and what each leads to (the listing's own excluded)."""
    out = {}
    for f in os.listdir("/proc/self/fd"):
        try:
            out[f] = os.readlink(f"/proc/self/fd/{f}")
        except FileNotFoundError:  # the listing's own descriptor, closed since
            pass
    return out


class _Refused(_Pump):
    """A copy that cannot start (a thread the system refuses: `RuntimeError`)."""

    def start(self) -> None:
        raise RuntimeError("can't start new thread")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("bwrap") is None,
                    reason="a sandboxed run needs root and bwrap")
def test_a_copy_that_cannot_start_leaves_no_program_nor_descriptor(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An exception while the copy starts (run in a `finally`) left the pipes' read ends
    open and the program running unwaited. Now the program is killed and waited for, and
    no descriptor stays open."""
    _program.run_program(["true"], cwd=tmp_path)  # what the sandbox keeps (its rulesets)
    monkeypatch.setattr(_program, "_Pump", _Refused)
    fds = open_fds()
    mark = tmp_path / "mark"
    with pytest.raises(RuntimeError):
        _program.run_program(["sh", "-c", f"sleep 1; touch {mark}; sleep 30"], cwd=tmp_path,
                             timeout=60)
    time.sleep(1.5)
    assert not mark.exists()  # the program ended with the failure
    # none left that was not there before (an earlier test's store in this worker, closed
    # by the collector meanwhile, may be gone)
    assert open_fds().items() <= fds.items()
    ps = subprocess.run(["pgrep", "-f", f"touch {mark}"], capture_output=True, text=True)
    assert ps.stdout == ""
