"""`storlab fio-server`: fio's server for client mode, inside the walls local runs get."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ._common import at_least, console, input_dir


def fio_server_cmd(
    scratch: Path = typer.Option(..., "--dir", help="The only place the server may write "
                                 "(its working directory; must exist): the clients' "
                                 "targets must lie under it. Run as root, the server runs "
                                 "as its owner, which must not be root nor a system account; "
                                 "no link on its path, not in a system tree.",
                                 callback=input_dir("--dir")),
    bind: str = typer.Option("127.0.0.1", "--bind", help="IPv4 or IPv6 address to listen "
                             "on."),
    port: int = typer.Option(8765, "--port", help="TCP port (fio's default 8765).",
                             callback=at_least("--port", 1, 65535)),
    devices: Optional[list[str]] = typer.Option(None, "--device", help="A block or "
                                                "character device node clients may write "
                                                "(repeatable); none by default."),
    connect_ports: Optional[list[int]] = typer.Option(
        None, "--connect-port", help="Another TCP port the server's jobs may connect to "
        "(repeatable); none by default.",
        callback=lambda v: [at_least("--connect-port", 1, 65535)(p) for p in v or []]),
    ceph: bool = typer.Option(
        False, "--ceph/--no-ceph", help="Let the jobs reach a Ceph cluster on its default "
        "ports (the rbd/rados engines): TCP to 3300, 6789 and 6800-7300."),
    io_uring: bool = typer.Option(
        False, "--io-uring/--no-io-uring", help="Let the jobs make io_uring rings (fio's "
        "io_uring engines)."),
) -> None:
    """Run `fio --server` in bubblewrap walls until it is stopped: as DIR's owner (never
    root, no capability), the system trees read-only, a private /dev with only the
    --device nodes, DIR writable, TCP held to --port (and --connect-port). fio's protocol
    has no authentication: anyone who reaches the port runs I/O jobs, as that account,
    against DIR and the declared devices (and may read what that account may read)."""
    from ..campaign.runners import serve_fio

    code, out = serve_fio(scratch, bind, port, devices or [], connect_ports or [],
                          ceph=ceph, io_uring=io_uring,
                          announce=lambda line: console.print(line, markup=False))
    if out:
        console.print(out, markup=False)
    raise typer.Exit(0 if code in (0, None) else 1)


def register(app: typer.Typer) -> None:
    app.command("fio-server")(fio_server_cmd)
