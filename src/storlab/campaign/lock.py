"""One writer per campaign: an exclusive lock on `<store>.lock`, next to the store.

The lock is a kernel lock (flock) on that file, so it is released by the kernel the moment its
holder dies, however it dies: a lock left by a SIGKILLed `storlab run` is never "stuck". The
file itself names the holder (pid, process start time, host, since when, command) for the
message the next process shows; it is emptied on a clean release and never deleted (deleting
a flock'ed file lets two processes lock two different files of the same name). A file that
still names a holder when the lock is free was left by a holder that died: it is taken over.

The lock's file descriptor is closed in forked children (multiprocessing workers), so a
worker that outlives its parent cannot keep the campaign locked.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import socket
import stat
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import _proc_lifetime
from ..errors import CampaignError, CampaignLocked, StorlabError
from ..fileio import check_trusted_entry, open_dir_beneath


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a campaign's lock."""

    pid: int
    start: int | None
    host: str
    since: float
    command: str

    @classmethod
    def me(cls) -> Holder:
        cmd = shlex.join(sys.argv) if sys.argv and sys.argv[0] else f"python pid {os.getpid()}"
        return cls(os.getpid(), _proc_lifetime.start_time(os.getpid()), socket.gethostname(),
                   time.time(), cmd)

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(self.since))
        cmd = " ".join(self.command.split())  # one line, whatever the command held
        if len(cmd) > 120:
            cmd = cmd[:117] + "..."
        return f"pid {self.pid} on {self.host} since {when} ({cmd})"

    def alive(self) -> bool | None:
        """Still running (same pid and start time)? None when it ran on another host."""
        if self.host != socket.gethostname():
            return None
        return _proc_lifetime.alive(self.pid, self.start)


#: Lock descriptors this process holds (closed in forked children, see module doc).
_HELD: set[int] = set()


def _close_in_child() -> None:
    for fd in list(_HELD):
        try:
            os.close(fd)  # drops the child's reference; the parent's lock stays
        except OSError:
            pass
    _HELD.clear()


os.register_at_fork(after_in_child=_close_in_child)


def lock_path(store: Path) -> Path:
    return store.with_name(store.name + ".lock")


def _read(fd: int) -> Holder | None:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = os.read(fd, 65536)
        d = json.loads(data) if data.strip() else None
        return Holder(int(d["pid"]), d.get("start"), str(d["host"]), float(d["since"]),
                      str(d.get("command", ""))) if d else None
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _write(fd: int, holder: Holder | None) -> None:
    """Record the holder (best effort: on a full disk the lock still holds, only the name of
    its holder is missing from the message others see)."""
    try:
        os.ftruncate(fd, 0)
        if holder is not None:
            os.pwrite(fd, (json.dumps(asdict(holder)) + "\n").encode(), 0)
            os.fsync(fd)
    except OSError:
        pass


@contextmanager
def hold(store: Path, wait: bool = False, on_wait: Callable[[Holder | None], None] | None = None,
         poll: float = 0.2, what: str = "campaign is being run",
         home: Path | None = None) -> Iterator[tuple[Holder, Holder | None]]:
    """Hold the writer lock of `store` (a campaign's store, or its scratch directory); yields
    (this holder, the stale holder taken over or None). Held by another live process:
    CampaignLocked naming it, or with `wait=True` wait until it is free (`on_wait` is told
    each new holder waited for). With `home` (the campaign's directory), the lock file is
    made in its directory as opened from `home` without following a link
    (`fileio.open_dir_beneath`): a directory link planted on the way is refused."""
    path = lock_path(store)
    try:
        dfd = open_dir_beneath(home if home is not None else path.parent, path.parent,
                               what="lock file")
    except StorlabError as exc:
        raise CampaignError(str(exc)) from None
    try:
        # never through a link (one to a victim file was truncated by the holder record)
        fd = os.open(path.name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644,
                     dir_fd=dfd)
    except OSError as exc:
        raise CampaignError(f"{path}: cannot open the campaign's lock file ({exc.strerror})"
                            ) from None
    finally:
        os.close(dfd)
    st = os.fstat(fd)
    try:  # another user's lock (or one others may write): theirs to hold or to swap
        check_trusted_entry(str(path), st, "lock file")
    except StorlabError as exc:
        os.close(fd)
        raise CampaignError(str(exc)) from None
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        # a hard link planted at the lock's name (to a victim file) would be truncated and
        # written with the holder record: only a file of the campaign's own is a lock
        os.close(fd)
        raise CampaignError(f"{path}: the campaign's lock file is not a regular file with one "
                            f"link (links: {st.st_nlink}); remove it, storlab makes it anew")
    locked = False
    try:
        told: Holder | None | bool = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
                break
            except BlockingIOError:
                holder = _read(fd)
                if holder is None:  # it has the lock but has not written its name yet
                    time.sleep(0.05)
                    holder = _read(fd)
                if not wait:
                    who = holder.describe() if holder else "another process"
                    raise CampaignLocked(
                        f"{store}: {what} by {who}; wait for it to finish, or give "
                        "the same command --wait") from None
                if on_wait is not None and told != holder:
                    on_wait(holder)
                    told = holder
                time.sleep(poll)
        stale = _read(fd)
        me = Holder.me()
        _write(fd, me)
        _HELD.add(fd)
        yield me, stale
    finally:
        _HELD.discard(fd)
        if locked:
            _write(fd, None)  # a clean release: nothing stale to report next time
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
