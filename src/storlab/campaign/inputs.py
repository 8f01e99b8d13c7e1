"""The files a campaign file names (its space, design CSV, cluster file), checked before
storlab reads them.

storlab often runs as root while the campaign file is somebody's: a name in it that leads
(through a link, or by an absolute or `..` path) to a file that somebody could not read
would make root read it and show its lines in an error (`column(s) ['root:x:...'] are not
factors`). A campaign input is read when what it opens lies inside the campaign's
directory (links followed: the file opened is checked, not the name), or when the owner
of the campaign file could read it themselves (a shared cluster file under /opt, an
example file); otherwise it is refused in one line naming the file, its content unread.
The file is opened once, and the descriptor checked is the one read
(`read_campaign_input`): a name swapped between a check and a read cannot redirect it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import CampaignError, StorlabError
from ..fileio import MAX_INPUT_BYTES, check_input_stat, within


def read_campaign_input(path: str | Path, campaign: str | Path, what: str = "",
                        limit: int = MAX_INPUT_BYTES) -> bytes:
    """The content of `path` (a file the campaign file `campaign` names; `what` starts
    the refusal's line after the caller's own words), read only when allowed (see the
    module). The file is opened once and that descriptor is checked and read: a name
    swapped for a link between a check and a second open cannot make storlab read
    another file. A missing, non-regular or too large file is the readers' one line."""
    p = Path(path)
    fd = _open_checked(p, campaign, what, limit)
    try:
        with os.fdopen(fd, "rb") as fh:
            return fh.read(limit + 1)  # a file that grows while read stays bounded
    except OSError as exc:
        raise StorlabError(f"{p}: cannot read ({exc.strerror or exc})") from None


def check_campaign_input(path: str | Path, campaign: str | Path, what: str = "") -> Path:
    """`path` once checked as `read_campaign_input` checks it, for a reader that opens
    it later by name (a runner's option in a worker); a missing file passes (its reader
    says so)."""
    p = Path(path)
    try:
        os.close(_open_checked(p, campaign, what, MAX_INPUT_BYTES))
    except StorlabError:
        if not os.path.lexists(p):
            return p
        raise
    return p


def _open_checked(p: Path, campaign: str | Path, what: str, limit: int) -> int:
    """A read-only descriptor on `p` once the file it opened passed the checks (a
    regular file no larger than `limit`, inside the campaign's directory or readable by
    the campaign file's owner); a one-line StorlabError otherwise."""
    try:  # O_NONBLOCK: a FIFO's open does not wait for a writer (refused below)
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise StorlabError(f"{p}: file not found") from None
    except OSError as exc:
        raise StorlabError(f"{p}: cannot read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        check_input_stat(st, str(p), limit)
        real = os.readlink(f"/proc/self/fd/{fd}")
        os.set_blocking(fd, True)
        if not _allowed(real, campaign):
            owner = _owner(campaign)
            raise CampaignError(f"{what}{p} leads outside the campaign's directory to a "
                                f"file the campaign file's owner (uid {owner}) cannot "
                                "read; storlab does not read it for them: copy a readable "
                                "file into the campaign's directory")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _owner(campaign: str | Path) -> int:
    try:
        return os.stat(campaign).st_uid
    except OSError:
        return os.geteuid()


def _allowed(real: str, campaign: str | Path) -> bool:
    """Whether storlab reads the regular file `real` (a descriptor's real path) for the
    campaign file `campaign`: inside its directory, or readable by its owner."""
    home = os.path.realpath(os.path.dirname(os.path.abspath(campaign)))
    if within(real, home, strict=True):
        return True
    owner = _owner(campaign)
    return owner == 0 or _may_read(owner, real)


def _may_read(uid: int, real: str) -> bool:
    """Whether user `uid` (with its groups) may read the file `real` (no link in it) and
    search every directory above it, by the mode bits (ACLs are not consulted: a file
    shared by an ACL alone is refused, the safe side)."""
    import pwd

    try:
        pw = pwd.getpwuid(uid)
        groups = set(os.getgrouplist(pw.pw_name, pw.pw_gid))
    except (KeyError, OSError):
        groups = set()

    def allowed(at: str, bits: int) -> bool:  # bits: 4 read, 1 search (as in rwx)
        try:
            st = os.stat(at)
        except OSError:
            return False
        shift = 6 if st.st_uid == uid else 3 if st.st_gid in groups else 0
        return bool((st.st_mode >> shift) & bits)

    parents = [str(d) for d in Path(real).parents]
    return allowed(real, 4) and all(allowed(d, 1) for d in parents)
