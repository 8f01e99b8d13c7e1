"""The walls a cluster's programs start in (Ceph's daemons, its `ceph`/`rados` CLI and
bootstrap tools): the runs' bubblewrap sandbox (`_sandbox.Walls`), registered with the
cluster layer (`clusters.use_walls`) when this module loads (the ceph runner and the
`cluster` commands import it).

What such a program gets: the system's trees read-only, a private /dev with the usual
pseudo devices only, a private read-only /proc, empty read-only /tmp and /run, the
capabilities past the mounts dropped, the seccomp filter and Landlock's scopes of every
run; the host's network (the cluster listens there), TCP held by Landlock to the ports it
is given (the monitor's, the OSDs' range, radosgw's). Writable: only the places named (a
daemon's data directory and the cluster's runtime directory; for a CLI call usually none).
Shown read-only: the places named (the conf, the admin keyring). None of the campaign's
own declarations reach these walls: they are the cluster's, not a run's."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

from ...clusters import ClusterError, Walled, use_walls
from ...errors import CampaignError
from ...fileio import within
from ._sandbox import (BWRAP_ENV_OUTSIDE, SYSTEM_TREES, Walls, clamp_memlock, enter_landlock,
                       landlock_refused, open_plain, require_sandbox, unsandboxed)


def cluster_walls(program: Sequence[str], *, cwd: str, writable: Sequence[str] = (),
                  readable: Sequence[str] = (), ports: Sequence[int] = (),
                  unix_sockets: bool = False, daemon: bool = False,
                  die_with_parent: bool = True, info_fd: int | None = None,
                  proc_writable: bool = False, user: str | None = None,
                  copies: Sequence[str] = ()) -> Walled:
    """`program` ready to start in its walls (see the module's text); `program` as it is
    when the user opted out of the sandbox (`STORLAB_UNSANDBOXED=1`). Each writable place
    is bound from a descriptor opened without a link on the way. `user`: the program
    runs as that account (`setpriv` inside the walls: its uid and group, no other group,
    no capability), never root; `copies`: files shown as read-only copies every account
    inside reads (a root-only conf or keyring, unchanged on the host). Raises
    ClusterError in one line when the walls cannot be built."""
    if unsandboxed():
        return Walled(list(program), inside=False)
    shown = [*writable, *readable, *copies]
    w = Walls(network=True, tcp_ports=tuple(sorted(set(ports))), unix_sockets=unix_sockets,
              # a daemon tied to storlab is not pid 1: bwrap's own init is, which dies with
              # storlab (--die-with-parent) and takes the PID namespace down with it; a
              # daemon that changes its credentials (ceph's --setuser) loses the
              # parent-death signal bwrap gave it, so as pid 1 it would outlive a kill
              strict=False, die_with_parent=die_with_parent,
              as_pid_1=daemon and not die_with_parent,
              info_fd=info_fd, open_dirs=_above(shown) if daemon or user else (),
              proc_writable=proc_writable)
    try:
        require_sandbox()
        why = landlock_refused()
        if why:
            raise CampaignError(f"Landlock: {why}")
        for p in writable:
            fd = open_plain(p)
            if fd is None:
                raise CampaignError(f"{p} is missing or reached through a link")
            w.add(fd, p)
        for r in readable:
            w.show(r)
        for c in copies:
            if not w.copy(c):
                raise CampaignError(f"{c} is missing, not a regular file or reached "
                                    "through a link")
        argv = w.argv([*_as_user(user), *program] if user else program, cwd)
        ruleset = w.landlock()
    except CampaignError as exc:
        w.close()
        raise ClusterError(f"cannot build the sandbox of {program[0]}: {exc}") from None
    except BaseException:
        w.close()
        raise
    return Walled(argv, tuple(w.all_fds), dict(BWRAP_ENV_OUTSIDE),
                  functools.partial(_enter, ruleset), w.close)


def _enter(ruleset: int | None) -> None:
    """The child's `preexec_fn`: the hard RLIMIT_MEMLOCK down to the soft one (no Ceph
    program storlab starts locks memory: memstore, a bluestore file and TCP messengers;
    none keeps CAP_IPC_LOCK, so a hard limit above the soft one, systemd's
    `LimitMEMLOCK=infinity` say, only let it raise its own), then the Landlock rules."""
    clamp_memlock()
    if ruleset is not None:
        enter_landlock(ruleset)


def _as_user(user: str) -> list[str]:
    """The `setpriv` words that start a program as `user` (its uid and primary group, no
    supplementary group, no inheritable capability: the kernel clears the rest when the
    uid leaves 0). Raises CampaignError without the account or a system setpriv."""
    import pwd
    import shutil

    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        raise CampaignError(f"no `{user}` user on this host") from None
    if pw.pw_uid == 0:
        raise CampaignError(f"`{user}` is root: a program run as another user never is")
    found = shutil.which("setpriv")
    setpriv = os.path.realpath(found) if found else ""
    try:
        st = os.stat(setpriv) if setpriv else None
    except OSError:
        st = None
    # the system's file (root's, under /usr, not writable by others), not one a PATH leads to
    if st is None or st.st_uid != 0 or st.st_mode & 0o022 or not within(setpriv, "/usr"):
        raise CampaignError("no system setpriv (util-linux, root's under /usr), which "
                            "drops root")
    return [setpriv, f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups",
            "--inh-caps=-all", "--"]


def _above(paths: Sequence[str]) -> tuple[str, ...]:
    """The directories above `paths`, outermost first, that the sandbox's root makes
    (none of the system's trees, shown from the host): the mount points on the way to a
    daemon's places, which bwrap makes with the host directories' modes (a 0700 base)."""
    out: dict[str, None] = {}
    for p in paths:
        parts = os.path.normpath(p).split("/")[1:-1]
        for i in range(1, len(parts) + 1):
            d = "/" + "/".join(parts[:i])
            if not any(within(d, t) for t in SYSTEM_TREES):
                out[d] = None
    return tuple(sorted(out, key=lambda d: d.count("/")))


def register_cluster_walls() -> None:
    """Register these walls with the cluster layer (again: idempotent). Importing this
    module does it; the CLI's cluster commands call it through the runners' face."""
    use_walls(cluster_walls, unsandboxed)


register_cluster_walls()
