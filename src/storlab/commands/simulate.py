"""`storlab simulate`: run the Swift-like cluster model, sweep what-ifs, or calibrate it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from ..fileio import read_text, save_figure, write_frame, write_text
from ._common import (at_least, console, emit_json, escape, fraction, frame_table, input_dir,
                      input_file, output_file)

if TYPE_CHECKING:
    import pandas as pd


def _pairs(items: list[str], option: str) -> dict[str, str]:
    from ..errors import SimError

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
    analytic: bool = typer.Option(False, "--analytic/--no-analytic", help="Solve with mean value analysis "
                                  "instead of simulating (fast, means only)."),
    requests: Optional[int] = typer.Option(None, "--requests", help="Requests to simulate "
                                           "(overrides workload.requests).",
                                           callback=at_least("--requests", 1)),
    executor: str = typer.Option("local", "--executor", "-e", help="Sweeps: local (processes), "
                                 "serial, dask (a local Dask cluster), dask://host:port, or "
                                 "a campaign executor (sequential, parallel:N)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Parallel sweep workers.",
                                          callback=at_least("--workers", 1)),
    campaign: Optional[Path] = typer.Option(None, "--campaign", help="Sweeps: the campaign "
                                            "directory (store, design); the same command "
                                            "resumes it. Default: simulate-sweep/<cluster>-"
                                            "<digest of the sweep>.",
                                            callback=input_dir("--campaign")),
    quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", help="Sweeps: no progress."),
    wait: bool = typer.Option(False, "--wait/--no-wait", help="Sweeps: if another storlab "
                              "runs this sweep's campaign, wait for it to finish instead of "
                              "refusing."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write the plot to this file: a "
                                        "run's time series (throughput, latency, utilisation "
                                        "per interval), the sweep or the calibration.",
                                        callback=output_file("--plot")),
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
    as_json: bool = typer.Option(False, "--json/--no-json", help="Print JSON."),
    output: Optional[Path] = typer.Option(None, "-o", "--output",
                                          help="Write results: .json as JSON, else CSV.",
                                          callback=output_file("-o")),
) -> None:
    """Simulate a Swift-like cluster: throughput, latency per operation, utilisation of every
    resource and the bottleneck; --sweep for what-if grids, --calibrate to fit measurements."""
    from ..errors import SimError
    from ..sim import apply_overrides, build_model, load_raw, parse_cluster

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
        from ..campaign import check_executor, default_directory, run_sweep
        from ..sim import parse_sweep
        from ._progress import campaign_progress

        axes = parse_sweep(sweep)
        check_executor(executor)
        where = campaign or default_directory(raw, axes, analytic, backend, src)
        with campaign_progress("sweep", quiet, as_json, prefer=("ops_s",)) as on_event:
            res = run_sweep(raw, axes, analytic=analytic, executor=executor, workers=workers,
                            source=src, backend=backend, campaign=where, on_event=on_event,
                            wait=wait)
        df = res.table()
        if _write_table(df, {"factors": res.factors, "analytic": analytic, "rows": df,
                             "campaign": str(res.campaign), "notes": res.notes},
                        output, as_json):
            # (the bytes of a size axis are for programs: the table shows it as written)
            cols = [c for c in df.columns if not c.startswith("util_")
                    and not (c.endswith("_bytes") and c[:-len("_bytes")] in res.factors)]
            how = (" (analytic)" if analytic else
                   "; ± = 95 % batch-means half-width of each simulated run")
            console.print(frame_table(_ops_display(df[cols]), title=f"sweep of {src}{how}"))
            for note in res.notes:
                console.print(f"note: {note}")
        if plot is not None:
            _save_fig(res.plot(), plot)
        return
    if plot is not None and analytic:
        raise SimError("--plot with --analytic: a single analytic solution has no time series "
                       "to plot (simulate, or add --sweep)")
    model = build_model(parse_cluster(raw, src))
    if analytic:
        from ..sim import refuse_analytic, solve_mva

        refuse_analytic(model.spec)
        rep: Any = solve_mva(model)
    else:
        from ..sim import run_model

        rep = run_model(model, backend=backend)
    data = rep.to_dict()
    if _write_table(rep.ops, data, output, as_json):
        _print_report(rep, src, analytic)
    if plot is not None:
        _save_fig(rep.plot(), plot)


def _ops_display(ops: pd.DataFrame) -> pd.DataFrame:
    """The per-op table with each confidence half-width beside its value."""
    out = ops.copy()
    for value, ci in (("ops_s", "ops_s_ci95"), ("lat_mean_ms", "lat_mean_ci95_ms")):
        if ci in out:
            out.insert(out.columns.get_loc(value) + 1, f"±{value}",
                       out.pop(ci))
    return out


def _print_report(rep: Any, src: str, analytic: bool) -> None:
    if analytic:
        from ..sim import ACCURACY

        how = (f"analytic ({rep.method}); against the simulator on the shipped examples: "
               f"throughput within {ACCURACY['throughput']:.0%}, mean latency within "
               f"{ACCURACY['latency']:.0%}")
    else:
        w = rep.window
        how = (f"simulated {rep.requests:,} requests; measured the {w['requests']:,} that "
               f"finished in the steady window {w['from_s']:.2f}-{w['to_s']:.2f} s (left out: "
               f"warm-up, the first {w['warmup_requests']:,} requests; drain, "
               f"{w['drain_s']:.2f} s after the window); ± = 95 % batch-means interval "
               f"({w['batches']} batches)")
    console.print(frame_table(_ops_display(rep.ops),
                              title=f"{rep.name}: {src} — {rep.loop} loop, {how}"))
    for f in getattr(rep, "failures", None) or []:
        until = "the end" if f["to_s"] is None else f"{f['to_s']:g} s"
        rebuild = f", rebuild {f['rebuild_mb_s']:g} MB/s" if f["rebuild_mb_s"] else ""
        console.print(f"failure: {', '.join(f['down'])} down from {f['from_s']:g} s to {until} "
                      f"({f['placed']}): {f['requests']:,} requests met it, "
                      f"{f['rerouted']:,} re-routed, {f['failed']:,} failed{rebuild}")
        if f.get("ops_s") is not None:
            outside = (f"; outside failure windows {f['ops_s_outside']:,.1f} ops/s, "
                       f"{f['lat_mean_ms_outside']:.2f} ms"
                       if f.get("ops_s_outside") is not None else "")
            console.print(f"  while down (measured window): {f['ops_s']:,.1f} ops/s, mean "
                          f"latency {f['lat_mean_ms']:.2f} ms{outside}")
    console.print(frame_table(rep.util, title="utilisation by resource", floatfmt="{:.3f}"))
    b = rep.bottleneck
    console.print(f"bottleneck: [bold]{escape(str(b['resource']))}[/bold] "
                  f"({escape(str(b['station']))}, utilisation {b['utilisation']:.1%})",
                  markup=True)
    if not analytic:
        console.print(f"Little's law check: |L - XW|/L = {rep.littles_law_error:.2e} (system), "
                      f"{rep.station_littles_error:.2e} (worst station), "
                      f"{rep.littles_law_system:.2e} (requests in the window); {rep.events:,} events "
                      f"in {rep.wall:.2f} s engine + {rep.build_wall:.2f} s route building")
    for note in rep.notes:
        console.print(f"[yellow]note:[/yellow] {escape(str(note))}", markup=True)


def _calibrate(raw: dict[str, Any], src: str, csv: Path, holdout: float,
               save: Path | None, plot: Path | None, as_json: bool, output: Path | None) -> None:
    from ..errors import SimError
    from ..sim import calibrate_cluster as calibrate
    from ..sim import read_measurements

    if not 0 <= holdout < 1:
        raise SimError(f"--holdout {holdout}: must be in [0, 1)")
    # read once (binary or non-UTF-8: one line naming the file), parsed from that text:
    # opening the path again would block on a FIFO put there meanwhile
    text = read_text(csv, "--calibrate")
    from ._progress import task_progress

    with task_progress("calibrate", quiet=as_json) as step:
        res = calibrate(raw, read_measurements(csv, text=text), holdout=holdout, source=str(csv),
                        progress=step)
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
