"""The seccomp filter's allow-list of socket families and its refusal of user namespaces,
through the real CLI and real bwrap: a program of a run makes AF_INET, AF_INET6, AF_NETLINK
sockets (and Unix ones when declared) but no AF_VSOCK socket (not namespaced: it reached
the host's vsock ports), AF_ALG, AF_PACKET, AF_XDP or AF_TIPC one; `unshare(CLONE_NEWUSER)`
gets EPERM while threads, `fork` and `posix_spawn` (glibc's `clone3` falls back to
`clone`) keep working."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap not installed"),
              pytest.mark.xdist_group("fio")]

#: What the run's program tries; prints {"got": {what: "ok" or the errno's name}}.
PROBE = """
import ctypes, errno, json, os, socket, subprocess, sys, threading
got = {}
def attempt(name, f):
    try:
        f()
        got[name] = "ok"
    except OSError as e:
        got[name] = errno.errorcode.get(e.errno, str(e.errno))
def sock(fam, kind):
    return lambda: socket.socket(fam, kind).close()
for name, fam, kind in [("vsock", 40, 1), ("alg", 38, 5), ("packet", 17, 2), ("xdp", 44, 3),
                        ("tipc", 30, 2), ("inet", 2, 1), ("inet6", 10, 1),
                        ("netlink", 16, 3), ("unix", 1, 1)]:
    attempt(name, sock(fam, kind))
attempt("vsock_pair", lambda: socket.socketpair(40, 1))
attempt("tipc_pair", lambda: socket.socketpair(30, 5))
attempt("unix_pair", lambda: [s.close() for s in socket.socketpair()])
libc = ctypes.CDLL(None, use_errno=True)
def unshare(flags):
    if libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
attempt("unshare_user", lambda: unshare(0x10000000))
def clone3():
    if libc.syscall(435, None, 0) != 0:  # no arguments: EFAULT/EINVAL where it is allowed
        raise OSError(ctypes.get_errno(), "clone3")
attempt("clone3", clone3)
box = []
t = threading.Thread(target=lambda: box.append(1)); t.start(); t.join()
got["thread"] = "ok" if box else "no"
got["spawn"] = subprocess.run([sys.executable, "-c", "pass"]).returncode
pid = os.fork()
if pid == 0:
    os._exit(7)
got["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps({"y": 1, "got": got}))
"""


def _probe(tmp_path: Path, command_campaign: Callable[..., Path],
           program_got: Callable[[Path], Any], **sandbox: Any) -> dict[str, Any]:
    d = tmp_path / "c"
    d.mkdir(parents=True)
    (d / "probe.py").write_text(PROBE)
    return program_got(command_campaign(d, ["/usr/bin/python3", str(d / "probe.py")],
                                        **sandbox))


def test_only_listed_socket_families_open(tmp_path: Path, command_campaign: Any,
                                          program_got: Any) -> None:
    got = _probe(tmp_path, command_campaign, program_got)
    for fam in ("vsock", "alg", "packet", "xdp", "tipc", "vsock_pair", "tipc_pair"):
        assert got[fam] == "EPERM", (fam, got)
    for fam in ("inet", "inet6", "netlink", "unix_pair"):
        assert got[fam] == "ok", (fam, got)
    assert got["unix"] == "EPERM", got  # the Unix rule, undeclared
    # declared: Unix sockets open, the other families stay shut
    got = _probe(tmp_path / "u", command_campaign, program_got, unix_sockets=True)
    assert got["unix"] == "ok" and got["vsock"] == "EPERM" and got["alg"] == "EPERM", got


def test_no_user_namespace_inside(tmp_path: Path, command_campaign: Any,
                                  program_got: Any) -> None:
    got = _probe(tmp_path, command_campaign, program_got)
    assert got["unshare_user"] == "EPERM", got
    assert got["clone3"] == "ENOSYS", got
    assert got["thread"] == "ok" and got["spawn"] == 0 and got["fork"] == 7, got


@pytest.mark.skipif(os.geteuid() != 0, reason="root's capabilities inside")
def test_no_user_namespace_with_the_network(tmp_path: Path, command_campaign: Any,
                                            program_got: Any) -> None:
    """With the host's network declared too (no network namespace of the sandbox's own)."""
    got = _probe(tmp_path, command_campaign, program_got, network=True)
    assert got["unshare_user"] == "EPERM" and got["vsock"] == "EPERM", got
