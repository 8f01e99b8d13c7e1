"""`CephCluster.probe` lets the `ceph` user (rados runs as it) read and write its files.
A process of that account (a compromised daemon) watching the temporary directory renames
a link to a root-only file over the probe's `in` as soon as the directory is its own: a
chown by path afterwards gave that file to ceph (/etc/shadow: root for the ceph account).
Now the directory stays root's (0711) and only its two files are ceph's.
Raced here for real: the `ceph` user's own process against the real `probe()` (no cluster
needed: rados fails after the files were given)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from storlab.campaign.runners import register_cluster_walls
from storlab.clusters.ceph import CephCluster


pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to `ceph` needs root"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv"),
    pytest.mark.usefixtures("ceph_account"),
]

#: the `ceph` account's racer (stdlib only): for each new directory in WATCH, renames a
#: link to VICTIM over DIR/in for up to 0.3 s (it succeeded once DIR was ceph's; DIR now
#: stays root's 0711)
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


#: what the `ceph` account tries in the probe's directory D (argv[1]): one word per try
TRIES = r"""
import json, os, sys
d = sys.argv[1]
def attempt(f):
    try:
        f()
        return "done"
    except OSError as e:
        return os.strerror(e.errno)
def write_out():
    with open(os.path.join(d, "out"), "wb") as fh:  # as rados get: O_WRONLY|O_CREAT|O_TRUNC
        fh.write(b"object")
got = {
    "list": attempt(lambda: os.listdir(d)),
    "rename in": attempt(lambda: os.rename(os.path.join(d, "in"), os.path.join(d, "x"))),
    "unlink in": attempt(lambda: os.unlink(os.path.join(d, "in"))),
    "link over": attempt(lambda: os.symlink("/etc/shadow", os.path.join(d, "y"))),
    "rename dir": attempt(lambda: os.rename(d, d + ".mine")),
    "chmod dir": attempt(lambda: os.chmod(d, 0o777)),
    "read in": attempt(lambda: open(os.path.join(d, "in"), "rb").read()),
    "write out": attempt(write_out),
}
print(json.dumps(got))
"""


def test_the_probe_directory_stays_roots_with_only_its_files_given_to_ceph():
    """The probe's temporary directory, in root's sticky TMPDIR, stays root's 0711; only
    `in` and `out` are ceph's (0600, given by descriptor). The `ceph` account (a real uid
    switch) reads `in` and writes `out`, as rados does, and can neither list the
    directory, nor rename, remove or link anything in it, nor rename or chmod the
    directory itself (when it was ceph's, it could do all of these)."""
    import json

    from storlab.clusters.ceph import _ceph_ids, _prepare_probe_dir

    tmp = tempfile.mkdtemp(prefix="storlab-probe-test-", dir="/tmp")  # sticky, as TMPDIR
    try:
        dfd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            _prepare_probe_dir(dfd, b"D" * 4096)
        finally:
            os.close(dfd)
        uid, gid = _ceph_ids()
        st = os.lstat(tmp)
        assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o711)
        for name, size in (("in", 4096), ("out", 0)):
            f = os.lstat(os.path.join(tmp, name))
            assert (f.st_uid, f.st_gid, f.st_mode & 0o7777, f.st_size) == (uid, gid, 0o600,
                                                                           size), name
        assert sorted(os.listdir(tmp)) == ["in", "out"]
        r = subprocess.run(
            ["setpriv", "--reuid=ceph", "--regid=ceph", "--clear-groups", sys.executable
             if sys.executable.startswith("/usr/") else "/usr/bin/python3", "-c", TRIES,
             tmp], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
        denied = {"Permission denied", "Operation not permitted"}
        for k in ("list", "rename in", "unlink in", "link over", "rename dir", "chmod dir"):
            assert got[k] in denied, (k, got)
        assert got["read in"] == got["write out"] == "done", got
        assert os.lstat(tmp).st_uid == 0 and sorted(os.listdir(tmp)) == ["in", "out"]
        assert Path(tmp, "out").read_bytes() == b"object"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
