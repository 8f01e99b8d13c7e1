"""Helpers the campaign tests share."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml


@pytest.fixture
def loopdev() -> Iterator[str]:
    """A real 4 MiB loop device over random bytes in a tmp directory, detached after; the
    test is skipped when losetup is unavailable or cannot attach one here."""
    size = 4 << 20
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("needs root and losetup")
    d = Path(tempfile.mkdtemp(prefix="storlab-loop-", dir="/tmp"))
    backing = d / "disk.img"
    backing.write_bytes(os.urandom(size))
    p = subprocess.run(["losetup", "-f", "--show", str(backing)], capture_output=True,
                       text=True)
    if p.returncode != 0:
        shutil.rmtree(d)
        pytest.skip(f"losetup failed: {p.stderr.strip()}")
    dev = p.stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """An existing 2 MiB file outside the campaign (a test's campaign lives below
    tmp_path), whose bytes the guard and sandbox tests compare before and after."""
    v = tmp_path / "victim.dat"
    v.write_bytes(os.urandom(2 << 20))
    return v


def _command_campaign(d: Path, argv: list[str], timeout: float = 60, **sandbox: Any) -> Path:
    """A one-run command campaign in `d` running `argv`, with `sandbox` declared."""
    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "g", "timeout": timeout, "space": {"factors": [
                {"name": "n", "kind": "categorical", "values": ["a", "b"]}],
                "responses": [{"name": "y", "goal": "maximize"}]},
            "design": {"configs": [{"n": "a"}]},
            "runner": {"type": "command", "options": {"command": argv,
                                                      "json_metrics": {"y": "y"}}},
            "sandbox": sandbox}
    (d / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return d / "campaign.yaml"


def _program_got(storlab: Any, camp: Path) -> Any:
    """Run a `_command_campaign` with the CLI; the `got` its program printed last."""
    r = storlab("run", str(camp), timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    outs = list((camp.parent / "campaign.db.output").glob("*.stdout"))
    assert len(outs) == 1, outs
    lines = [ln for ln in outs[0].read_text().splitlines() if ln.startswith("{")]
    assert lines, outs[0].read_text() + outs[0].with_suffix(".stderr").read_text()
    return json.loads(lines[-1])["got"]


@pytest.fixture
def command_campaign() -> Callable[..., Path]:
    """`command_campaign(dir, argv, timeout=60, **sandbox)`: a one-run command campaign."""
    return _command_campaign


@pytest.fixture
def program_got(storlab: Any) -> Callable[[Path], Any]:
    """`program_got(campaign)`: run it with the CLI; what its program reported as `got`."""
    return lambda camp: _program_got(storlab, camp)


def _integer_campaign(d: Path, design: dict[str, Any], factors: int = 5,
                      responses: list[dict[str, Any]] | None = None, **spec: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    space: dict[str, Any] = {"factors": [{"name": f"x{i}", "kind": "integer", "range": [1, 2]}
                                         for i in range(factors)]}
    if responses is not None:
        space["responses"] = responses
    full = {"name": "c", "seed": 3, "randomize": False, "space": space, "design": design,
            "runner": {"type": "command", "options": {
                "command": [sys.executable, "-c", "import json; print(json.dumps({'y': 1.0}))"],
                "json_metrics": {"y": "y"}}}, **spec}
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(full, sort_keys=False))
    return p


@pytest.fixture(scope="session")
def integer_campaign() -> Callable[..., Path]:
    """`integer_campaign(d, design, factors=5, responses=None, **spec)`: d/campaign.yaml, a
    campaign of `factors` integer factors x0, x1, ... in [1, 2] planned by `design` (its
    `design:` mapping), each run a program printing y = 1.0; `responses` the space's
    `responses:` (none declared by default), `spec` other top-level keys (`name`...)."""
    return _integer_campaign


@pytest.fixture(scope="session")
def as_nobody() -> Callable[[Callable[[], Any]], str]:
    """`as_nobody(fn)`: `fn()` run in a forked child as the user nobody (no groups); its
    result as text (`repr`), or `raised <Exception>: <message>`."""
    import pwd

    def run(fn: Callable[[], Any]) -> str:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: nobody, then the answer on the pipe
            try:
                os.close(r)
                nobody = pwd.getpwnam("nobody")
                os.setgroups([])
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
                os.write(w, repr(fn()).encode())
            except BaseException as exc:  # noqa: BLE001 - said to the parent
                os.write(w, f"raised {type(exc).__name__}: {exc}".encode())
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as fh:
            said = fh.read().decode()
        os.waitpid(pid, 0)
        return said
    return run


@pytest.fixture
def tls_dask_cluster(tmp_path_factory: pytest.TempPathFactory,
                     monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A user's own Dask cluster as docs/clusters.md starts one: mutual TLS, its CA and the
    client's certificate given to storlab through Dask's TLS environment variables (plain
    TCP is refused as root). Yields the LocalCluster."""
    from distributed import LocalCluster
    from distributed.security import Security

    from storlab.clusters.dask_tls import client_env, write_credentials

    sec = Security.temporary()
    d = tmp_path_factory.mktemp("dask-tls")
    d.chmod(0o700)
    for k, v in client_env(write_credentials(sec, d)).items():
        monkeypatch.setenv(k, v)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, protocol="tls",
                      host="127.0.0.1", security=sec, dashboard_address=None) as cluster:
        yield cluster


#: The program of `uring_connect`.
_URING_CONNECT = """
import ctypes, json, mmap, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
ring = libc.syscall(425, 8, params)  # io_uring_setup (x86_64, aarch64: the same number)
if ring < 0:
    print(json.dumps({"y": 1, "got": f"setup:{ctypes.get_errno()}"}))
    sys.exit(0)
sq_n, cq_n = struct.unpack_from("<II", params, 0)
sq_off = struct.unpack_from("<7I", params, 40)  # head tail mask entries flags dropped array
cq_off = struct.unpack_from("<6I", params, 80)  # head tail mask entries overflow cqes
sq = mmap.mmap(ring, sq_off[6] + sq_n * 4, offset=0)
cq = mmap.mmap(ring, cq_off[5] + cq_n * 16, offset=0x8000000)
sqes = mmap.mmap(ring, sq_n * 64, offset=0x10000000)

def submit(op, fd, off, addr):
    tail = struct.unpack_from("<I", sq, sq_off[1])[0]
    i = tail & struct.unpack_from("<I", sq, sq_off[2])[0]
    sqes[i * 64:(i + 1) * 64] = struct.pack("<BBHiQQIIQHHiQQ", op, 0, 0, fd, off, addr,
                                            0, 0, 7, 0, 0, 0, 0, 0)
    struct.pack_into("<I", sq, sq_off[6] + 4 * i, i)
    struct.pack_into("<I", sq, sq_off[1], tail + 1)
    libc.syscall(426, ring, 1, 1, 1, None, 0)  # io_uring_enter, IORING_ENTER_GETEVENTS
    head = struct.unpack_from("<I", cq, cq_off[0])[0]
    j = head & struct.unpack_from("<I", cq, cq_off[2])[0]
    res = struct.unpack_from("<QiI", cq, cq_off[5] + 16 * j)[1]
    struct.pack_into("<I", cq, cq_off[0], head + 1)
    return res

sock = submit(45, 1, 1, 0)  # IORING_OP_SOCKET: AF_UNIX, SOCK_STREAM
path = sys.argv[1].encode()
addr = ctypes.create_string_buffer(struct.pack("<H", 1) + path + b"\\0", 110)
got = f"socket:{sock}" if sock < 0 else \\
    f"connect:{submit(16, sock, 3 + len(path), ctypes.addressof(addr))}"
print(json.dumps({"y": 1, "got": got}))
"""


@pytest.fixture
def uring_connect() -> str:
    """A Python program that connects to the Unix socket argv[1] through io_uring alone:
    IORING_OP_SOCKET then IORING_OP_CONNECT, by hand (liburing has no Python binding here),
    so no socket() or connect() passes the seccomp filter. Prints the metric line with
    `got`: `setup:<errno>` when no ring can be made, `socket:<result>` when the ring makes
    no socket, else `connect:<result>` (0, or minus the errno)."""
    return _URING_CONNECT
