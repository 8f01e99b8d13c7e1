"""`storlab simulate`: run the Swift-like cluster model, sweep what-ifs, or calibrate it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from ..fileio import read_text, save_figure, write_frame, write_text
from ._common import (at_least, console, emit_json, fraction, frame_table, input_file,
                      output_file)

if TYPE_CHECKING:
    import pandas as pd


def _pairs(items: list[str], option: str) -> dict[str, str]:
    from ..sim.cluster import SimError

    out: dict[str, str] = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise SimError(f"{option} {item!r}: expected NAME=VALUE")
        out[k.strip()] = v.strip()
    return out


def _write_table(df: pd.DataFrame, data: dict[str, Any], output: Path | None, as_json: bool
                 ) -> bool:
    """Handle --json / -o; True when the readable tables should still be printed."""
    is_json = output is not None and output.suffix.lower() == ".json"
    if output is not None and not is_json:
        write_frame(df, output, fmt="csv")
    if as_json or is_json:
        emit_json(data, output if is_json else None)
        return not as_json
    return True


def _save_fig(fig: Any, path: Path) -> None:
    save_figure(fig, path, dpi=120)
    console.print(f"plot written to {path}")


def simulate_cmd(
    cluster: Path = typer.Argument(..., help="Cluster and workload YAML (see examples/sim).",
                                   callback=input_file("cluster")),
    set_: list[str] = typer.Option([], "--set", help="Override a field: nodes=8, disk=ssd_s3700, "
                                   "nic=25, swift.replicas=2, storage.disks.count=24 ..."),
    sweep: list[str] = typer.Option([], "--sweep", help="What-if grid axis NAME=V1,V2 "
                                    "(repeat for a full factorial)."),
    analytic: bool = typer.Option(False, "--analytic", help="Solve with mean value analysis "
                                  "instead of simulating (fast, means only)."),
    requests: Optional[int] = typer.Option(None, "--requests", help="Requests to simulate "
                                           "(overrides workload.requests).",
                                           callback=at_least("--requests", 1)),
    executor: str = typer.Option("local", "--executor", help="Sweeps: local, serial, dask, "
                                 "or dask://host:port."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Parallel sweep workers.",
                                          callback=at_least("--workers", 1)),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write the sweep (or calibration) "
                                        "plot to this file.", callback=output_file("--plot")),
    calibrate: Optional[Path] = typer.Option(None, "--calibrate", help="Fit CPU costs and disk "
                                             "parameters to a CSV of measured throughputs.",
                                             callback=input_file("--calibrate")),
    holdout: float = typer.Option(0.0, "--holdout", help="Calibration: share of points held "
                                  "out for testing (when the CSV has no split column).",
                                  callback=fraction("--holdout", low_closed=True)),
    save_calibrated: Optional[Path] = typer.Option(None, "--save-calibrated", help="Write the "
                                                   "calibrated cluster YAML.",
                                                   callback=output_file("--save-calibrated")),
    backend: str = typer.Option("rust", "--backend", help="Engine: rust or python."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    output: Optional[Path] = typer.Option(None, "-o", "--output",
                                          help="Write results: .json as JSON, else CSV.",
                                          callback=output_file("-o")),
) -> None:
    """Simulate a Swift-like cluster: throughput, latency per operation, utilisation of every
    resource and the bottleneck; --sweep for what-if grids, --calibrate to fit measurements."""
    from ..sim.cluster import SimError, apply_overrides, build_model, load_raw, parse_cluster

    src = str(cluster)
    read_text(cluster)  # binary or non-UTF-8 input: one line naming the file
    raw = load_raw(cluster)
    overrides: dict[str, Any] = _pairs(set_, "--set")
    if requests is not None:
        overrides["requests"] = requests
    if overrides:
        raw = apply_overrides(raw, overrides, src)
    if backend not in ("rust", "python"):
        raise SimError(f"--backend {backend!r}: use rust or python")
    if calibrate is not None:
        _calibrate(raw, src, calibrate, holdout, save_calibrated, plot, as_json, output)
        return
    if sweep:
        from ..sim.sweep import parse_sweep, run_sweep

        res = run_sweep(raw, parse_sweep(sweep), analytic=analytic, executor=executor,
                        workers=workers, source=src, backend=backend)
        df = res.table()
        if _write_table(df, {"factors": res.factors, "analytic": analytic, "rows": df},
                        output, as_json):
            cols = [c for c in df.columns if not c.startswith("util_")]
            console.print(frame_table(df[cols], title=f"sweep of {src}"
                                      + (" (analytic)" if analytic else "")))
        if plot is not None:
            _save_fig(res.plot(), plot)
        return
    model = build_model(parse_cluster(raw, src))
    if analytic:
        from ..sim.analytic import analyse

        rep: Any = analyse(model)
    else:
        from ..sim.cluster import run_model

        rep = run_model(model, backend=backend)
    data = rep.to_dict()
    if _write_table(rep.ops, data, output, as_json):
        _print_report(rep, src, analytic)


def _print_report(rep: Any, src: str, analytic: bool) -> None:
    how = f"analytic ({rep.method})" if analytic else f"simulated, {rep.requests:,} requests"
    console.print(frame_table(rep.ops, title=f"{rep.name}: {src} — {rep.loop} loop, {how}"))
    console.print(frame_table(rep.util, title="utilisation by resource", floatfmt="{:.3f}"))
    b = rep.bottleneck
    console.print(f"bottleneck: [bold]{b['resource']}[/bold] ({b['station']}, "
                  f"utilisation {b['utilisation']:.1%})")
    if not analytic:
        console.print(f"Little's law check: |L - XW|/L = {rep.littles_law_error:.2e} (system), "
                      f"{rep.station_littles_error:.2e} (worst station); {rep.events:,} events "
                      f"in {rep.wall:.2f} s engine + {rep.build_wall:.2f} s route building")
    for note in rep.notes:
        console.print(f"[yellow]note:[/yellow] {note}")


def _calibrate(raw: dict[str, Any], src: str, csv: Path, holdout: float,
               save: Path | None, plot: Path | None, as_json: bool, output: Path | None) -> None:
    from ..sim.calibrate import calibrate, read_measurements
    from ..sim.cluster import SimError

    if not 0 <= holdout < 1:
        raise SimError(f"--holdout {holdout}: must be in [0, 1)")
    read_text(csv, "--calibrate")  # binary or non-UTF-8 input: one line naming the file
    res = calibrate(raw, read_measurements(csv), holdout=holdout, source=str(csv))
    if save is not None:
        import yaml

        write_text(save, yaml.safe_dump(res.raw, sort_keys=False), what="--save-calibrated")
    if _write_table(res.points, res.to_dict(), output, as_json):
        console.print(frame_table(res.params_table(), title=f"calibrated multipliers ({src})",
                                  floatfmt="{:.3f}"))
        console.print(frame_table(res.points, title=f"measured vs predicted ({csv})"))
        for k, v in res.summary().items():
            console.print(f"{k}: {v:.1f}")
        if save is not None:
            console.print(f"calibrated cluster written to {save}")
    if plot is not None:
        _save_fig(res.plot(), plot)


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_cmd)
