"""`CephCluster.probe` gives its temporary directory to the `ceph` user (rados runs as it).
A process of that account (a compromised daemon) watching the temporary directory renames
a link to a root-only file over the probe's `in` as soon as the directory is its own: a
chown by path afterwards gave that file to ceph (/etc/shadow: root for the ceph account).
Raced here for real: the `ceph` user's own process against the real `probe()` (no cluster
needed: rados fails after the directory was given)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from storlab.campaign.runners import register_cluster_walls
from storlab.clusters.ceph import CephCluster


def _ceph_user() -> bool:
    try:
        pwd.getpwnam("ceph")
        return True
    except KeyError:
        return False


pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to `ceph` needs root"),
    pytest.mark.skipif(not _ceph_user() or shutil.which("setpriv") is None,
                       reason="needs the `ceph` user and setpriv"),
]

#: the `ceph` account's racer (stdlib only): for each new directory in WATCH, renames a
#: link to VICTIM over DIR/in for up to 0.3 s (it succeeds once DIR is ceph's)
RACER = r"""
import ctypes, errno, os, signal, struct, sys, time
victim, watch, stop = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3])
libc = ctypes.CDLL("libc.so.6", use_errno=True)
ifd = libc.inotify_init1(0)
libc.inotify_add_watch(ifd, watch.encode(), 0x100)  # IN_CREATE
mine = os.path.join(watch, f"race-{os.getpid()}"); os.mkdir(mine)
signal.signal(signal.SIGALRM, lambda *a: None); signal.setitimer(signal.ITIMER_REAL, 0.5, 0.5)
print("ready", flush=True)
n = 0
while time.time() < stop:
    try:
        buf = os.read(ifd, 65536)
    except InterruptedError:
        continue
    off = 0
    while off < len(buf):
        wd, mask, cookie, ln = struct.unpack_from("iIII", buf, off)
        name = buf[off + 16: off + 16 + ln].rstrip(b"\0").decode(errors="replace")
        off += 16 + ln
        if not mask & 0x40000000 or name.startswith("race-"):
            continue
        lnk = os.path.join(mine, f"l{n}"); n += 1
        os.symlink(victim, lnk)
        end = time.monotonic() + 0.3
        while time.monotonic() < end:
            try:
                os.rename(lnk, os.path.join(watch, name, "in"))
                break
            except OSError as e:
                if e.errno == errno.ENOENT and not os.path.lexists(os.path.join(watch, name)):
                    break
        if os.path.lexists(lnk):
            os.unlink(lnk)
"""


def test_the_ceph_user_cannot_swap_a_link_in_before_the_probe_gives_its_file(
        tmp_path, monkeypatch):
    victim = tmp_path / "victim"  # a root-only file in a root-only directory
    victim.write_text("SECRET\n")
    victim.chmod(0o600)
    watch = tempfile.mkdtemp(prefix="storlab-race-", dir="/tmp")  # root's TMPDIR, as /tmp
    os.chmod(watch, 0o1777)
    monkeypatch.setattr(tempfile, "tempdir", watch)
    racer = subprocess.Popen(
        ["setpriv", "--reuid=ceph", "--regid=ceph", "--clear-groups", sys.executable
         if sys.executable.startswith("/usr/") else "/usr/bin/python3", "-c", RACER,
         str(victim), watch, "120"], stdout=subprocess.PIPE, text=True)
    try:
        assert racer.stdout is not None and racer.stdout.readline().strip() == "ready"
        register_cluster_walls()  # as the CLI: rados runs walled, as the `ceph` user
        c = CephCluster(tmp_path / "cluster")  # no cluster: rados fails after the chowns
        said, t0 = [], time.monotonic()
        for _ in range(60):
            said.append(c.probe(timeout=1))
            assert victim.stat().st_uid == 0, f"the victim was given to ceph: {said[-1]}"
            assert racer.poll() is None, "the racer died"
            if time.monotonic() - t0 > 90:
                break
        assert all(s.startswith("failed: rados") for s in said), said[-1]
    finally:
        racer.kill()
        racer.wait()
        shutil.rmtree(watch, ignore_errors=True)
    assert victim.read_text() == "SECRET\n" and victim.stat().st_uid == 0
