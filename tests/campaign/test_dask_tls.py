"""The Dask cluster `simulate --sweep --executor dask` starts takes work only from a
client holding its TLS certificate: a client that connects as anyone on the host could
(the attack: a program of a run, given the host's network, reached the root scheduler on
127.0.0.1 and ran code as root with `run_on_scheduler`) is refused. Real Dask."""

from __future__ import annotations

from storlab.campaign.executors import make_executor
from storlab.campaign.sweep_campaign import campaign_executor


def _anyone(address: str) -> object:
    """What an unauthenticated client got from the scheduler at `address`."""
    from distributed import Client

    try:
        with Client(address, timeout=5) as c:
            return c.run_on_scheduler(lambda: "ran on the scheduler")
    except (OSError, TimeoutError, TypeError) as exc:  # TypeError: tls:// without a context
        return exc


def test_the_sweeps_dask_cluster_refuses_a_client_without_its_certificate() -> None:
    with campaign_executor("dask", 1, 2) as spec:
        where = spec.split("://", 1)[1]
        for scheme in ("tcp", "tls"):
            got = _anyone(f"{scheme}://{where}")
            assert got != "ran on the scheduler", (scheme, got)
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
    (here: to a port where nothing listens)."""
    import os

    if os.geteuid() != 0:
        import pytest

        pytest.skip("the refusal is for root")
    camp = command_campaign(tmp_path / "c", ["true"])
    for how in ("dask://127.0.0.1:9", "tcp://127.0.0.1:9"):
        r = storlab("run", camp, "-q", "-e", how, timeout=60)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "plain TCP as root" in r.stderr and "STORLAB_DASK_INSECURE=1" in r.stderr
    r = storlab("run", camp, "-q", "-e", "dask://127.0.0.1:9", timeout=120,
                env={"STORLAB_DASK_INSECURE": "1"})
    assert r.returncode == 2 and "cannot reach the Dask scheduler at tcp://" in r.stderr


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
