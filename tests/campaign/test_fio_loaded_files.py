"""fio options that load a file's bytes into what fio writes or sends (`buffer_pattern`
and `verify_pattern` with a quoted 'file', `read_iolog`) read it inside the walls, where
the system's trees are shown: a campaign declaring nothing had fio's net engine send a
root-only file of /etc to its listener (`buffer_pattern: "'/etc/secret'"`). Now such a
file outside the campaign's directory is refused before any run, in one line naming the
option, unless allow_destructive; inside the campaign's directory it is read as before.
Real fio, real walls, a real listener."""

from __future__ import annotations

import os
import shutil
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("fio")
                                 or not shutil.which("bwrap"),
                                 reason="root, fio and bwrap run the walls for real"),
              pytest.mark.xdist_group("fio")]


def _campaign(d: Path, options: dict[str, Any], **extra: Any) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    spec = {"name": "t", "seed": 1, "randomize": False,
            "space": {"factors": [{"name": "bs", "kind": "categorical",
                                   "values": ["4k", "8k"]}]},
            "design": {"configs": [{"bs": "4k"}]},
            "runner": {"type": "fio", "options": options}, **extra}
    (d / "campaign.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return d / "campaign.yaml"


@pytest.fixture
def secret() -> Any:
    """A root-only (0600) file under /etc, as /etc/shadow is."""
    p = Path("/etc") / f"storlab-test-secret-{os.getpid()}"
    p.write_bytes(b"ROOT-ONLY-" + os.urandom(8).hex().encode() + b"\n")
    p.chmod(0o600)
    try:
        yield p
    finally:
        p.unlink()


def _write_campaign(d: Path, pattern: str, **extra: Any) -> Path:
    return _campaign(d, {"rw": "write", "size": "8k", "filename": "out.dat",
                         "buffer_pattern": pattern, "scramble_buffers": 0}, **extra)


class Listener:
    """A TCP listener on the loopback keeping the first 4 KiB of its first connection."""

    def __init__(self) -> None:
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(1)
        self.srv.settimeout(60)
        self.port = self.srv.getsockname()[1]
        self.got: list[bytes] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        try:
            c, _ = self.srv.accept()
            c.settimeout(30)
            data = b""
            while len(data) < 4096:
                chunk = c.recv(4096)
                if not chunk:
                    break
                data += chunk
            self.got.append(data)
            # drained to the end, not closed at once: fio writing to a closed peer dies of
            # SIGPIPE (fio 3.33 then aborts with a double free), a flaky failure
            while c.recv(65536):
                pass
            c.close()
        except OSError:
            pass

    def received(self) -> bytes:
        self.thread.join(60)
        self.srv.close()
        return self.got[0] if self.got else b""


def _net(port: int, pattern: str) -> dict[str, Any]:
    return {"ioengine": "net", "hostname": "127.0.0.1", "port": port, "rw": "write",
            "size": "64k", "buffer_pattern": pattern, "scramble_buffers": 0}


def test_a_pattern_file_inside_the_campaign_is_read(storlab: Any, tmp_path: Path) -> None:
    d = tmp_path / "c"
    d.mkdir()
    (d / "pat.bin").write_bytes(b"CAMPAIGN-PATTERN")
    lis = Listener()
    # the listener is a service of this host: reached only with sandbox.network
    r = storlab("run", _campaign(d, _net(lis.port, f"'{d / 'pat.bin'}'"),
                                 sandbox={"network": True}), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert lis.received().startswith(b"CAMPAIGN-PATTERN" * 4)


def test_a_pattern_file_under_etc_is_refused_before_any_run(storlab: Any, tmp_path: Path,
                                                            secret: Path) -> None:
    for option, value in (("buffer_pattern", f"'{secret}'"),
                          ("buffer_pattern", f'0x41"ab"\'{secret}\''),
                          ("verify_pattern", f"'{secret}'"),
                          ("read_iolog", str(secret))):
        d = tmp_path / option / str(len(value))
        opts = {"rw": "write", "size": "8k", "filename": "out.dat", option: value}
        if option == "verify_pattern":
            opts["verify"] = "pattern"
        camp = _campaign(d, opts)
        r = storlab("run", camp, timeout=120)
        out = r.stdout + r.stderr
        assert r.returncode == 2 and "Traceback" not in out, out
        assert f"field runner.options.{option}" in out and str(secret) in out, out
        assert "outside the campaign's directory" in out, out
        assert not list(d.glob("scratch/c*")), "a run started"
    # a link inside the campaign to the file: judged on what it leads to
    d = tmp_path / "link"
    d.mkdir()
    (d / "pat").symlink_to(secret)
    r = storlab("run", _write_campaign(d, f"'{d / 'pat'}'"), timeout=120)
    assert r.returncode == 2 and f"leading to {secret}" in r.stdout + r.stderr, r.stderr
    # fio's abbreviation of the option: refused as well
    r = storlab("run", _campaign(tmp_path / "abbr", {"rw": "write", "size": "8k",
                                                     "filename": "out.dat",
                                                     "buffer_pat": f"'{secret}'"}),
                timeout=120)
    assert r.returncode == 2 and "abbreviation of buffer_pattern" in r.stdout + r.stderr, \
        r.stdout + r.stderr


def test_the_net_engine_sends_no_root_only_file(storlab: Any, tmp_path: Path,
                                                 secret: Path) -> None:
    """The attack itself: no declaration, fio's net engine, a listener on the loopback.
    Refused; with allow_destructive (the operator's call) the bytes go."""
    lis = Listener()
    opts = _net(lis.port, f"'{secret}'")
    net = {"network": True}  # the listener is a service of this host: reached only so
    r = storlab("run", _campaign(tmp_path / "c", opts, sandbox=net), timeout=120)
    assert r.returncode == 2 and "field runner.options.buffer_pattern" in r.stdout + r.stderr, \
        r.stdout + r.stderr
    r = storlab("run", _campaign(tmp_path / "a", {**opts, "allow_destructive": True},
                                 sandbox=net), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert lis.received().startswith(secret.read_bytes())
