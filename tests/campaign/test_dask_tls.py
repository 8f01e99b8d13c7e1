"""The Dask cluster `simulate --sweep --executor dask` starts takes work only from a
client holding its TLS certificate: a client that connects as anyone on the host could
(the attack: a program of a run, given the host's network, reached the root scheduler on
127.0.0.1 and ran code as root with `run_on_scheduler`) is refused. Real Dask."""

from __future__ import annotations

import contextlib
import socket
import ssl
from pathlib import Path

from storlab.campaign import executors
from storlab.campaign.executors import make_executor
from storlab.campaign.sweep_campaign import campaign_executor

#: What the scheduler answers a client without a certificate (TLS 1.3 sends its alert
#: after the client's handshake ends: on the first read; TLS 1.2 fails the handshake).
#: Or the connection just closes, the alert unread (seen two times in five here).
NO_CERT = {"TLSV13_ALERT_CERTIFICATE_REQUIRED", "SSLV3_ALERT_HANDSHAKE_FAILURE", "CLOSED"}


def _anyone(address: str, security: object = None) -> object:
    """What a client with `security` got from the scheduler at `address`."""
    from distributed import Client

    try:
        with Client(address, timeout=5, security=security) as c:
            return c.run_on_scheduler(lambda: "ran on the scheduler")
    except (OSError, TimeoutError) as exc:
        return exc


def _tls_reply(where: str, ca: str, cert: tuple[str, str] | None) -> str | None:
    """A real TLS connection to the scheduler at `where` that trusts its CA (PEM `ca`) and
    presents `cert` (files: certificate, key) or none: the SSL error's reason it got
    before or on the first read, or None when the scheduler kept talking."""
    host, port = where.rsplit(":", 1)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # distributed's own clients check the CA, not a name
    ctx.load_verify_locations(cadata=ca)
    if cert is not None:
        ctx.load_cert_chain(*cert)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        try:
            with ctx.wrap_socket(raw) as s:
                s.settimeout(2)
                s.sendall(b"\0" * 8)  # not a Dask frame: the server waits for more
                if s.recv(1) == b"":  # closed without an alert the client read
                    return "CLOSED"
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError):  # closed, the alert unread
            return "CLOSED"
        except ssl.SSLError as exc:
            return str(exc.reason)
        except ConnectionResetError:
            return "CLOSED"
        except TimeoutError:
            return None
    return None


def test_the_sweeps_dask_cluster_refuses_a_client_without_its_certificate(
        tmp_path: Path) -> None:
    from distributed.security import Security

    with campaign_executor("dask", 1, 2) as spec:
        where = spec.split("://", 1)[1]
        got = _anyone(f"tcp://{where}")
        assert isinstance(got, OSError), got
        sec = executors._SECURITY[where]
        # TLS trusting the scheduler's CA, no certificate: refused by the scheduler
        assert _tls_reply(where, sec.tls_ca_file, None) in NO_CERT
        # the same connection with storlab's certificate goes through the handshake
        paths = []
        for name, pem in (("cert", sec.tls_client_cert), ("key", sec.tls_client_key)):
            (tmp_path / name).write_text(pem)
            paths.append(str(tmp_path / name))
        assert _tls_reply(where, sec.tls_ca_file, (paths[0], paths[1])) is None
        # distributed's client with a certificate of another CA: the handshake fails
        other = Security.temporary()
        got = _anyone(f"tls://{where}", Security(
            tls_ca_file=sec.tls_ca_file, tls_client_cert=other.tls_client_cert,
            tls_client_key=other.tls_client_key, require_encryption=True))
        # the TLS failure, raised as itself or named by distributed's comm error
        assert isinstance(got, OSError) and (isinstance(got.__cause__, ssl.SSLError)
                                             or "SSLError" in str(got)), got
        ex = make_executor(spec)  # storlab's own client: its certificate
        try:
            assert ex.client.run_on_scheduler(lambda: 7) == 7
        finally:
            ex.client.close()


def test_a_plain_tcp_scheduler_is_refused_as_root_unless_the_operator_opts_out(
        tmp_path, storlab, command_campaign) -> None:
    """A user's scheduler on plain TCP runs code for anyone who reaches it, as its workers'
    account (root, with the docs' old recipe): as root storlab refuses to use one, in one
    line naming the TLS recipe, before any run; STORLAB_DASK_INSECURE=1 lets it through
    (here: to a port that accepts and closes every connection, so the client does connect,
    and fails at once; a port where nothing listens made it retry for its whole 30-second
    connect timeout)."""
    import os
    import threading

    if os.geteuid() != 0:
        import pytest

        pytest.skip("the refusal is for root")
    camp = command_campaign(tmp_path / "c", ["true"])
    for how in ("dask://127.0.0.1:9", "tcp://127.0.0.1:9"):
        r = storlab("run", camp, "-q", "-e", how, timeout=60)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "plain TCP as root" in r.stderr and "STORLAB_DASK_INSECURE=1" in r.stderr
    accepted: list[int] = []
    with socket.create_server(("127.0.0.1", 0)) as srv:

        def close_each() -> None:
            with contextlib.suppress(OSError):
                while True:
                    conn, _ = srv.accept()
                    accepted.append(1)
                    conn.close()

        threading.Thread(target=close_each, daemon=True).start()
        port = srv.getsockname()[1]
        r = storlab("run", camp, "-q", "-e", f"dask://127.0.0.1:{port}", timeout=120,
                    env={"STORLAB_DASK_INSECURE": "1"})
    assert r.returncode == 2 and "cannot reach the Dask scheduler at tcp://" in r.stderr
    assert accepted, "the opted-out client never connected"


def test_every_unencrypted_or_unknown_scheme_is_one_line(monkeypatch) -> None:
    """ws:// is as unauthenticated as tcp:// (refused as root); a scheme that names no
    scheduler host (inproc://, ucx://) is a one-line error, never a traceback."""
    import os

    import pytest

    from storlab.clusters.dask_tls import INSECURE_ENV, scheduler_address

    monkeypatch.delenv(INSECURE_ENV, raising=False)
    assert scheduler_address("tls://h:1") == "tls://h:1"
    for bad in ("inproc://h:1", "ucx://h:1", "http://h:1"):
        with pytest.raises(ValueError, match="unknown scheme"):
            scheduler_address(bad)
    if os.geteuid() == 0:
        for plain in ("ws://h:1", "tcp://h:1"):
            with pytest.raises(ValueError, match="plain TCP as root"):
                scheduler_address(plain)
        monkeypatch.setenv(INSECURE_ENV, "1")
        assert scheduler_address("ws://h:1") == "ws://h:1"
