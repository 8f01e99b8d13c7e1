"""`storlab fio-server`: fio's server for client mode, inside the walls local runs get."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ._common import at_least, console, input_dir


def fio_server_cmd(
    scratch: Path = typer.Option(..., "--dir", help="The only place the server may write "
                                 "(its working directory; must exist): the clients' "
                                 "targets must lie under it.", callback=input_dir("--dir")),
    bind: str = typer.Option("127.0.0.1", "--bind", help="Address to listen on."),
    port: int = typer.Option(8765, "--port", help="TCP port (fio's default 8765).",
                             callback=at_least("--port", 1, 65535)),
    devices: Optional[list[str]] = typer.Option(None, "--device", help="A device node "
                                                "clients may write (repeatable); none by "
                                                "default."),
) -> None:
    """Run `fio --server` in bubblewrap walls until it is stopped: read-only root, a
    private /dev with only the --device nodes, --dir writable, the network held to
    --port. Campaigns with `clients:` then reach nothing else on this host."""
    from ..campaign.runners import serve_fio

    shown = ", ".join(devices or []) or "none"
    console.print(f"fio server on {bind},{port} in its walls: writable {scratch}; "
                  f"devices {shown}", markup=False)
    code, out = serve_fio(scratch, bind, port, devices or [])
    if out:
        console.print(out, markup=False)
    raise typer.Exit(0 if code in (0, None) else 1)


def register(app: typer.Typer) -> None:
    app.command("fio-server")(fio_server_cmd)
