"""Which protocol a Dask scheduler given by address is reached with, and the refusal of an
unauthenticated one as root.

A Dask scheduler runs whatever its clients submit, as the account its workers run as: a
scheduler on plain TCP takes code from anyone who reaches its port. storlab's own clusters
(`campaign.executors.local_dask_cluster`, `clusters.netns.Lan.dask`) speak distributed's
mutual TLS with a certificate made for them; a scheduler the user started is reached with
Dask's own TLS configuration (`distributed.comm.tls.*`, e.g. the environment variables
`DASK_DISTRIBUTED__COMM__TLS__CA_FILE`, `..._CLIENT__CERT`, `..._CLIENT__KEY`;
docs/clusters.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: The operator's explicit opt-out of the refusal below (a private network where plain TCP
#: is accepted knowingly).
INSECURE_ENV = "STORLAB_DASK_INSECURE"

#: Dask's configuration keys (as environment variables) a client's TLS is read from.
TLS_ENV = {"ca": "DASK_DISTRIBUTED__COMM__TLS__CA_FILE",
           "cert": "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT",
           "key": "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"}


def _tls_configured() -> bool:
    import dask

    return bool(os.environ.get(TLS_ENV["ca"])
                or dask.config.get("distributed.comm.tls.ca-file", None))


def client_security() -> Any:
    """The client's TLS credentials from the TLS_ENV variables as they are now (Dask reads
    its environment once, at import: a process forked after that would miss them), else
    None: Dask's configuration then applies."""
    if not os.environ.get(TLS_ENV["ca"]):
        return None
    from distributed.security import Security

    return Security(tls_ca_file=os.environ[TLS_ENV["ca"]],
                    tls_client_cert=os.environ.get(TLS_ENV["cert"]),
                    tls_client_key=os.environ.get(TLS_ENV["key"]), require_encryption=True)


def scheduler_address(given: str) -> str:
    """`given` (`HOST:PORT`, `dask://HOST:PORT`, `tcp://...` or `tls://...`) as the address a
    client connects to: without a scheme (or `dask://`) `tls://` when Dask's configuration
    holds a TLS CA file, else `tcp://`. As root, a `tcp://` address is refused (ValueError,
    one line naming the TLS recipe) unless STORLAB_DASK_INSECURE=1: whoever reaches such a
    scheduler submits code to the same workers, and the keys sent with each task reach
    whoever answers at that address."""
    scheme, sep, where = given.partition("://")
    if not sep:
        scheme, where = "dask", given
    if scheme == "dask":
        scheme = "tls" if _tls_configured() else "tcp"
    address = f"{scheme}://{where}"
    if scheme not in ("tls", "tcp", "ws", "wss"):  # inproc, ucx...: not a scheduler host
        raise ValueError(f"Dask scheduler {given}: unknown scheme {scheme}:// (give "
                         "HOST:PORT, tls://HOST:PORT or tcp://HOST:PORT)")
    # ws:// is as unauthenticated as tcp://
    if scheme in ("tcp", "ws") and os.geteuid() == 0 and os.environ.get(INSECURE_ENV) != "1":
        raise ValueError(
            f"Dask scheduler {address}: plain TCP as root lets anyone who reaches it run code "
            f"as its workers' account; use TLS (set {TLS_ENV['ca']}, {TLS_ENV['cert']} and "
            f"{TLS_ENV['key']}: docs/clusters.md) or set {INSECURE_ENV}=1 on a private network")
    return address


def write_credentials(sec: Any, directory: Path) -> dict[str, str]:
    """Write `sec`'s (a `Security.temporary()`) CA, certificate and key into the private
    `directory` (0600 files), for Dask servers started as programs; their paths by
    'ca', 'cert', 'key'."""
    paths = {}
    for name, pem in (("ca", sec.tls_ca_file), ("cert", sec.tls_scheduler_cert),
                      ("key", sec.tls_scheduler_key)):
        p = directory / f"dask-{name}.pem"
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(pem)
        paths[name] = str(p)
    return paths


def client_env(paths: dict[str, str]) -> dict[str, str]:
    """The environment a `storlab` child needs to reach a scheduler with these files."""
    return {TLS_ENV[k]: v for k, v in paths.items()}
