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
from ._sandbox import (BWRAP_ENV_OUTSIDE, SYSTEM_TREES, Walls, enter_landlock,
                       landlock_refused, open_plain, require_sandbox, unsandboxed)


def cluster_walls(program: Sequence[str], *, cwd: str, writable: Sequence[str] = (),
                  readable: Sequence[str] = (), ports: Sequence[int] = (),
                  unix_sockets: bool = False, daemon: bool = False,
                  die_with_parent: bool = True, info_fd: int | None = None,
                  proc_writable: bool = False) -> Walled:
    """`program` ready to start in its walls (see the module's text); `program` as it is
    when the user opted out of the sandbox (`STORLAB_UNSANDBOXED=1`). Each writable place
    is bound from a descriptor opened without a link on the way. Raises ClusterError in
    one line when the walls cannot be built."""
    if unsandboxed():
        return Walled(list(program), inside=False)
    w = Walls(network=True, tcp_ports=tuple(sorted(set(ports))), unix_sockets=unix_sockets,
              # a daemon tied to storlab is not pid 1: bwrap's own init is, which dies with
              # storlab (--die-with-parent) and takes the PID namespace down with it; a
              # daemon that changes its credentials (ceph's --setuser) loses the
              # parent-death signal bwrap gave it, so as pid 1 it would outlive a kill
              strict=False, die_with_parent=die_with_parent,
              as_pid_1=daemon and not die_with_parent,
              info_fd=info_fd, open_dirs=_above([*writable, *readable]) if daemon else (),
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
        argv = w.argv(program, cwd)
        ruleset = w.landlock()
    except CampaignError as exc:
        w.close()
        raise ClusterError(f"cannot build the sandbox of {program[0]}: {exc}") from None
    except BaseException:
        w.close()
        raise
    return Walled(argv, tuple(w.all_fds), dict(BWRAP_ENV_OUTSIDE),
                  functools.partial(enter_landlock, ruleset) if ruleset is not None else None,
                  w.close)


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
