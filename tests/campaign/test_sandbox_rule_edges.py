"""Edges of the rules that keep a run's programs inside the campaign's directory: what
they must not refuse (a remote engine's object name, a place inside the campaign's own
directory, a non-root user's own files) and a refusal that must name what it judged."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

import pytest

from storlab.campaign.runners import refused_readable, refused_socket
from storlab.campaign.runners.fio import FioRunner

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="judges what root may do")


def test_a_remote_engines_object_name_is_no_path_outside(tmp_path: Path) -> None:
    """fio's http engine names an object (`/bucket/obj`), not a file here: it is not
    judged as a target outside the campaign's directory; a path-based engine's is."""
    job = FioRunner(ioengine="http", filename="/bucket/obj", rw="read", size="4k")
    assert job.refused_outside_target({}, tmp_path / "scratch" / "c1-r1",
                                      str(tmp_path)) is None
    local = FioRunner(ioengine="psync", filename="/bucket/obj", rw="read", size="4k")
    why = local.refused_outside_target({}, tmp_path / "scratch" / "c1-r1", str(tmp_path))
    assert why and "outside the campaign's directory" in why, why


@root_only
def test_a_readable_place_inside_the_campaign_in_roots_home_needs_nothing() -> None:
    """A campaign under /root declaring its own `inputs` readable (shown anyway): no
    opt-in; the same place judged without the campaign's directory still needs one."""
    home = tempfile.mkdtemp(prefix="storlab-edge-", dir="/root")
    try:
        (Path(home) / "inputs").mkdir()
        inputs = f"{home}/inputs"
        assert refused_readable([inputs], False, False, homes=[home]) is None
        why = refused_readable([inputs], False, False)
        assert why and "outside the campaign's directory" in why, why
    finally:
        shutil.rmtree(home)


@pytest.fixture
def open_dir():
    """A directory of root's that every user can reach (0755, under /tmp)."""
    d = Path(tempfile.mkdtemp(prefix="storlab-edge-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d)


@root_only
def test_a_non_root_users_own_places_need_no_opt_in(open_dir: Path, as_nobody: Any) -> None:
    """storlab run by a user reads only what that user may: their 0700 directory, or one
    under /home, needs no `allow_destructive` (its programs are not root)."""
    mine = open_dir / "mine"
    mine.mkdir(mode=0o700)
    os.chown(mine, pwd.getpwnam("nobody").pw_uid, -1)
    assert as_nobody(lambda: os.path.isdir(mine)) == "True"  # nobody reaches it
    said = as_nobody(lambda: refused_readable([str(mine), "/home"], False, False))
    assert said == "None", said
    assert refused_readable([str(mine)], False, False)  # as root: judged


@root_only
def test_a_socket_the_user_may_not_reach_is_one_line_naming_it(open_dir: Path,
                                                                 as_nobody: Any) -> None:
    """A declared socket the user may not connect to (root's, 0755): one line naming the
    socket, not a bare "Permission denied"."""
    path = open_dir / "root.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        srv.bind(str(path))
        srv.listen(1)
        os.chmod(path, 0o755)
        said = as_nobody(lambda: refused_socket([str(path)], allow=False))
        assert said.startswith(repr(f"{path}: cannot ask who listens there")[:-1]), said
    finally:
        srv.close()
