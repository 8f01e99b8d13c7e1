"""The files a campaign file names (its space, design CSV, cluster file), checked before
storlab reads them.

storlab often runs as root while the campaign file is somebody's: a name in it that leads
(through a link, or by an absolute or `..` path) to a file that somebody could not read
would make root read it and show its lines in an error (`column(s) ['root:x:...'] are not
factors`). A campaign input is read when what it opens lies inside the campaign's
directory (links followed: the file opened is checked, not the name), or when the owner
of the campaign file could read it themselves (a shared cluster file under /opt, an
example file); otherwise it is refused in one line naming the file, its content unread.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import CampaignError


def check_campaign_input(path: str | Path, campaign: str | Path, what: str = "") -> Path:
    """`path` (a file the campaign file `campaign` names; `what` starts the refusal's
    line after the caller's own words), once checked:
    a regular file inside the campaign's directory, or one the campaign file's owner may
    read (see the module). A missing file passes (its reader says so)."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return p
    try:
        st = os.fstat(fd)
        real = os.readlink(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)
    home = os.path.realpath(os.path.dirname(os.path.abspath(campaign)))
    if real.startswith(home.rstrip("/") + "/"):
        return p
    try:
        owner = os.stat(campaign).st_uid
    except OSError:
        owner = os.geteuid()
    if owner == 0 or (stat.S_ISREG(st.st_mode) and _may_read(owner, real)):
        return p
    raise CampaignError(f"{what}{p} leads outside the campaign's directory to a file the "
                        f"campaign file's owner (uid {owner}) cannot read; storlab does not "
                        "read it for them: copy a readable file into the campaign's "
                        "directory")


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
