"""`storlab estimate`: the f_rw read/write-mix model (fit, predict, measure with fio)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from ..fileio import read_table, read_text, save_figure, write_frame
from ..limits import MAX_SEED
from ._common import (at_least, console, emit_json, escape, fraction, frame_table, input_dir,
                      input_file, output_file, positive)

if TYPE_CHECKING:
    import pandas as pd

    from ..estimate import RWModel

# The library (scipy.stats) is imported inside the commands: `storlab` loads every command
# module at start-up, and only `storlab estimate ...` needs it.

estimate_app = typer.Typer(
    name="estimate", no_args_is_help=True, add_completion=False,
    help="Estimate mixed read/write performance from 100%-read and 100%-write runs "
         "(the f_rw capacity model, MSST 2019).")

JSON_OPT = typer.Option(False, "--json/--no-json", help="Print JSON.")
OUT_OPT = typer.Option(None, "-o", "--output",
                       help="Write the result: .json as JSON, anything else as CSV of the table.",
                       callback=output_file("-o"))
CONF_OPT = typer.Option(0.95, "--confidence", help="Confidence level of the intervals.",
                        callback=fraction("--confidence"))
PLOT_OPT = typer.Option(None, "--plot", help="Write the plot (png, svg, pdf).",
                        callback=output_file("--plot"))
SAVE_OPT = typer.Option(None, "--save-model", help="Write the model JSON.",
                        callback=output_file("--save-model"))
# `measure`'s outputs may go in the campaign directory it creates (est/runs.csv): they
# are checked in the command, once the campaign's path is known (_check_outputs).
M_OUT_OPT = typer.Option(None, "-o", "--output",
                         help="Write the result: .json as JSON, anything else as CSV of the "
                              "table.")
M_PLOT_OPT = typer.Option(None, "--plot", help="Write the plot (png, svg, pdf).")
M_SAVE_OPT = typer.Option(None, "--save-model", help="Write the model JSON.")


def _check_choice(value: str, choices: tuple[str, ...], option: str) -> str:
    from ..errors import EstimateError

    if value not in choices:
        raise EstimateError(f"{option} {value!r} is not one of {', '.join(choices)}")
    return value


def _save_plot(fig: Any, path: Path) -> None:
    save_figure(fig, path, dpi=120)
    console.print(f"plot written to {path}")


def _write(data: dict[str, Any], table: pd.DataFrame, output: Path | None, as_json: bool
           ) -> bool:
    """Handle --json / -o; True when the readable tables should still be printed."""
    if output is not None and output.suffix.lower() != ".json":
        write_frame(table, output, fmt="csv")
    if as_json or (output is not None and output.suffix.lower() == ".json"):
        emit_json(data, output if output is not None and output.suffix.lower() == ".json"
                  else None)
        return not as_json
    return True


def _warn(lines: list[str]) -> None:
    for line in lines:
        console.print(f"[yellow]warning:[/yellow] {escape(str(line))}", markup=True)


def _model_tables(model: RWModel, confidence: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    fits = model.table(confidence)
    mixes = model.validation(confidence).merge(
        model.capacity_table()[["size", "read_pct", "C", "C_dev"]], on=["size", "read_pct"])
    return fits, mixes


def _num(v: float) -> str:
    if not math.isfinite(v):
        return ""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _ci(v: float, lo: float, hi: float) -> str:
    """'675 ±50' (the intervals are symmetric), or just '675' when unknown."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return _num(v)
    return f"{_num(v)} ±{_num((hi - lo) / 2)}"


def _pct(v: float) -> str:
    return f"{v:+.1f}%" if math.isfinite(v) else ""


def fits_view(fits: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """The per-size fit table narrowed for a terminal."""
    c = f"{confidence:.0%}"
    import pandas as pd

    return pd.DataFrame({
        "size": fits["size"], "fit": fits["method"], "mixes": fits["mixes"],
        "T100 read": [_num(v) for v in fits["T100_read"]],
        "T100 write": [_num(v) for v in fits["T100_write"]],
        f"f_rw ({c})": [_ci(*t) for t in zip(fits["f_rw"], fits["f_rw_lo"], fits["f_rw_hi"])],
        f"C ({c})": [_ci(*t) for t in zip(fits["C"], fits["C_lo"], fits["C_hi"])],
        "C spread": [f"{v:.1%}" for v in fits["C_spread"]],
        "model error": [f"{v:.1%} (n={n})" if math.isfinite(v) else "unknown"
                        for v, n in zip(fits["model_sd"], fits["model_df"])],
        "pooled": [f"{v:.1%} (n={n})" if math.isfinite(v) else "unknown"
                   for v, n in zip(fits["model_sd_pooled"], fits["model_df_pooled"])],
        # what predictions use: the size's own shrunk toward the others' (df of its t)
        "shrunk (used)": [f"{v:.1%} (df {n:.3g})" if math.isfinite(v) else "unknown"
                          for v, n in zip(fits["model_sd_shrunk"], fits["model_df_shrunk"])],
    })


def mixes_view(mixes: pd.DataFrame) -> pd.DataFrame:
    """Predicted against measured at each measured mix, narrowed for a terminal."""
    import pandas as pd

    return pd.DataFrame({
        "size": mixes["size"], "read %": [f"{v:g}" for v in mixes["read_pct"]],
        "in fit": ["yes" if u else "no" for u in mixes["used_in_fit"]], "n": mixes["n"],
        "measured": [_num(v) for v in mixes["measured_iops"]],
        "predicted": [_ci(*t) for t in zip(mixes["predicted_iops"], mixes["pred_lo"],
                                           mixes["pred_hi"])],
        "error": [_pct(v) for v in mixes["error_pct"]],
        "C dev": [_pct(100 * v) for v in mixes["C_dev"]],
    })


def checks_view(chk: pd.DataFrame) -> pd.DataFrame:
    """`estimate measure`'s predicted-vs-measured table narrowed for a terminal."""
    import pandas as pd

    return pd.DataFrame({
        "kind": chk["kind"], "size": chk["size"], "read %": [f"{v:g}" for v in chk["read_pct"]],
        "rule": chk["rule"], "n": chk["n"],
        "mean I/O": [f"{v:.1f}k" for v in chk["mean_io_kib"]],
        "measured": [_ci(*t) for t in zip(chk["measured_iops"], chk["measured_lo"],
                                          chk["measured_hi"])],
        "predicted": [_ci(*t) for t in zip(chk["predicted_iops"], chk["pred_lo"],
                                           chk["pred_hi"])],
        "error": [_pct(v) for v in chk["error_pct"]],
    })


def mixed_view(mixed: pd.DataFrame) -> pd.DataFrame:
    """Mixed-size rows of a results table against both rules, narrowed for a terminal."""
    import pandas as pd

    return pd.DataFrame({
        "mix": mixed["mix"], "read %": [f"{v:g}" for v in mixed["read_pct"]],
        "rule": mixed["rule"], "n": mixed["n"],
        "measured": [_num(v) for v in mixed["measured_iops"]],
        "predicted": [_ci(*t) for t in zip(mixed["predicted_iops"], mixed["pred_lo"],
                                           mixed["pred_hi"])],
        "error": [_pct(v) for v in mixed["error_pct"]],
    })


def prediction_view(table: pd.DataFrame) -> pd.DataFrame:
    """A prediction narrowed for a terminal; bandwidth in MiB/s."""
    def col(q: str, scale: float = 1.0) -> list[str]:
        return [_ci(v / scale, lo / scale, hi / scale) for v, lo, hi in
                zip(table[q], table[f"{q}_lo"], table[f"{q}_hi"])]
    import pandas as pd

    return pd.DataFrame({
        "size": table["size"], "P": [f"{v:g}" for v in table["proportion"]],
        "read IOPS": col("read_iops"), "write IOPS": col("write_iops"),
        "total IOPS": col("total_iops"), "MiB/s": col("total_bw_bytes", 2**20),
    })


def fit_cmd(
    results: Path = typer.Argument(..., help="Results table (CSV or Parquet), one row per run.",
                                   callback=input_file("results", missing="no such file")),
    method: str = typer.Option("auto", "--method",
                               help="anchors (0% and 100% read only), anchors3 (0/50/100% "
                                    "by least squares), lsq (all mixes), auto (lsq when "
                                    "more than the two anchors)."),
    read_pct_col: Optional[str] = typer.Option(None, "--read-pct-col",
                                               help="Read percentage column (default: found "
                                                    "among read_pct, rwmixread, ...)."),
    size_col: Optional[str] = typer.Option(None, "--size-col",
                                           help="I/O size column (default: size, bs, ...)."),
    read_col: Optional[str] = typer.Option(None, "--read-col", help="Read throughput column."),
    write_col: Optional[str] = typer.Option(None, "--write-col", help="Write throughput column."),
    total_col: Optional[str] = typer.Option(None, "--total-col",
                                            help="Total throughput column (split by read %)."),
    threshold: float = typer.Option(0.10, "--threshold",
                                    help="Warn when C varies more than this across mixes.",
                                    callback=at_least("--threshold", 0)),
    confidence: float = CONF_OPT,
    save_model: Optional[Path] = SAVE_OPT,
    plot: Optional[Path] = PLOT_OPT,
    json_out: bool = JSON_OPT,
    output: Optional[Path] = OUT_OPT,
) -> None:
    """Fit f_rw per I/O size from a results table with read %, I/O size and throughput."""
    from ..estimate import METHODS, fit_table, mixed_checks, read_results, split_table

    _check_choice(method, METHODS, "--method")
    df = read_table(results)
    model = fit_table(df, method=method, spread_threshold=threshold, read_pct=read_pct_col,
                      size=size_col, read=read_col, write=write_col, total=total_col,
                      source=str(results))
    _, mixed_df, notes = split_table(df, size_col)
    mixed = mixed_checks(model, mixed_df, confidence, read_pct_col, size_col, str(results))
    if save_model is not None:
        model.save(save_model)
    fits, mixes = _model_tables(model, confidence)
    data = {"model": model.to_dict(), "fits": fits, "mixes": mixes, "mixed": mixed,
            "notes": notes, "warnings": model.warnings}
    if _write(data, mixes, output, json_out):
        for note in notes:
            console.print(f"note: {note}")
        console.print(frame_table(fits_view(fits, confidence), title="f_rw model per I/O size"))
        console.print(frame_table(mixes_view(mixes), title="measured mixes: total IOPS "
                                  "predicted vs measured, C deviation from the fit"))
        if len(mixed):
            console.print(frame_table(mixed_view(mixed), title="mixed sizes: total IOPS "
                                      "predicted (both rules) vs measured"))
        _warn(model.warnings)
        if save_model is not None:
            console.print(f"model written to {save_model}")
    if plot is not None:
        _save_plot(model.plot(confidence=confidence), plot)


def predict_cmd(
    model_path: Path = typer.Option(..., "--model", "-m", help="Model JSON from fit/measure.",
                                    callback=input_file("--model", missing="no such model file")),
    read_pct: float = typer.Option(..., "--read-pct", help="Read percentage, 0-100."),
    sizes: Optional[str] = typer.Option(None, "--sizes", "-s",
                                        help="Size mix with I/O-count proportions summing to "
                                             "1, e.g. 4k:0.8,64k:0.2 (default: the model's "
                                             "only size)."),
    mix: str = typer.Option("harmonic", "--mix",
                            help="How sizes combine: harmonic (capacity shared by per-I/O "
                                 "cost: 1/T = sum P_i/T_i; what measurements support) or "
                                 "slides (the MSST'19 formula 100*sum P_i k_i)."),
    confidence: float = CONF_OPT,
    plot: Optional[Path] = PLOT_OPT,
    json_out: bool = JSON_OPT,
    output: Optional[Path] = OUT_OPT,
) -> None:
    """Predict read, write and total IOPS and bandwidth from a saved model."""
    from ..estimate import MIXES, RWModel

    _check_choice(mix, MIXES, "--mix")
    # read once, from one descriptor (a FIFO renamed over the file after a first read
    # blocked root's storlab when the model was opened again); binary: one line
    model = RWModel.loads(read_text(model_path, "--model"), str(model_path))
    pr = model.predict(read_pct, sizes, mix=mix, confidence=confidence)
    table = pr.table()
    data = {**pr.to_dict(), "warnings": model.warnings}
    if _write(data, table, output, json_out):
        console.print(frame_table(prediction_view(table), title=f"prediction at {pr.read_pct:g}% read "
                                               f"(mix rule {mix}, {confidence:.0%} intervals)"))
        console.print(f"intervals: {pr.interval}")
        _warn(model.warnings)
    if plot is not None:
        _save_plot(pr.plot(), plot)


def measure_cmd(
    sizes: str = typer.Option("4k,64k", "--sizes", "-s", help="I/O sizes to model."),
    repeat: int = typer.Option(3, "--repeats", "--repeat", "-n",
                               help="Runs per (size, read %).",
                               callback=at_least("--repeats", 1)),
    validate: Optional[str] = typer.Option(None, "--validate",
                                           help="Read percentages to measure as a check, "
                                                "e.g. 30,50,70 (not used in the fit; they "
                                                "measure the model's error)."),
    third_anchor: bool = typer.Option(False, "--third-anchor/--no-third-anchor",
                                      help="Also measure 50% read and fit 0/50/100% by "
                                           "least squares (corrects a bias of the two-point "
                                           "line; gives intervals with model error)."),
    mixed: Optional[str] = typer.Option(None, "--mixed",
                                        help="A size mix to measure as a check (fio bssplit), "
                                             "e.g. 4k:0.8,64k:0.2; at the --validate "
                                             "percentages, or 70 if none."),
    mixed_pcts: Optional[str] = typer.Option(None, "--mixed-pcts",
                                             help="Read percentages of the --mixed runs."),
    runtime: float = typer.Option(3.0, "--runtime", help="Seconds per fio run.",
                                  callback=positive("--runtime")),
    file_size: str = typer.Option("256m", "--file-size", help="Scratch file size (a device "
                                  "is used whole unless -O size=...)."),
    campaign: Path = typer.Option(Path("estimate-measure"), "--campaign",
                                  help="Campaign directory: design, store and scratch. The "
                                       "same command resumes it.",
                                  callback=input_dir("--campaign")),
    target: Optional[Path] = typer.Option(None, "--target",
                                          help="Where fio does its I/O: a new file, a "
                                               "directory (a scratch file in it) or a block "
                                               "device (default: a file in the campaign "
                                               "directory)."),
    allow_destructive: bool = typer.Option(False, "--allow-destructive/--no-allow-destructive",
                                           help="Allow a block device or an existing file as "
                                                "--target: fio overwrites its data."),
    fio_option: Optional[list[str]] = typer.Option(None, "--fio-option", "-O",
                                                   help="Extra fio option KEY=VALUE "
                                                        "(repeatable), e.g. -O numjobs=2."),
    iodepth: int = typer.Option(16, "--iodepth", help="fio iodepth.",
                                callback=at_least("--iodepth", 1)),
    ioengine: str = typer.Option("libaio", "--ioengine", help="fio ioengine."),
    pattern: str = typer.Option("random", "--pattern", help="random or sequential."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed for the run order.",
                                       callback=at_least("--seed", 0, MAX_SEED)),
    confidence: float = CONF_OPT,
    save_model: Optional[Path] = M_SAVE_OPT,
    runs_out: Optional[Path] = typer.Option(None, "--runs", help="Write every run as CSV "
                                            "(`estimate fit` reads it)."),
    plot: Optional[Path] = M_PLOT_OPT,
    json_out: bool = JSON_OPT,
    output: Optional[Path] = M_OUT_OPT,
    wait: bool = typer.Option(False, "--wait/--no-wait",
                              help="If another storlab runs this campaign, wait for it to "
                                   "finish instead of exiting (then run what is left)."),
) -> None:
    """Measure 100%-read and 100%-write per size with fio, fit, and check other mixes.

    Runs are repeated in shuffled rounds (endpoints interleaved with the checks) as a
    campaign (resumable, stored); fio's random map is off and every run's mean I/O size is
    checked against the requested size or split. The model is fitted from the anchors
    only, then --validate and --mixed runs are compared with it.
    """
    from ..estimate import MeasurePlan, run_plan

    plan = MeasurePlan.build(sizes=sizes, repeat=repeat, validate=validate, mixed=mixed,
                             mixed_pcts=mixed_pcts, runtime=runtime, file_size=file_size,
                             iodepth=iodepth, ioengine=ioengine, pattern=pattern, seed=seed,
                             third_anchor=third_anchor, fio=fio_option or [])
    _check_outputs(campaign, {"--save-model": save_model, "--runs": runs_out, "--plot": plot,
                              "-o": output})
    from ._progress import campaign_progress

    quiet = json_out
    # campaign_progress quiet: only the lock's messages (waiting for another storlab, a
    # stale lock taken over), on stderr even with --json; run_plan prints the runs itself
    with campaign_progress("estimate measure", quiet=True) as lock_events:
        res = run_plan(plan, campaign, target=target, allow_destructive=allow_destructive,
                       confidence=confidence, wait=wait, on_event=lock_events,
                       progress=None if quiet else (lambda s: console.print(s,
                                                                             highlight=False)))
    if save_model is not None:
        res.model.save(save_model)
    if runs_out is not None:
        write_frame(res.runs, runs_out, what="--runs", fmt="csv")
    check = res.table()
    data = res.to_dict()
    if _write(data, check, output, json_out):
        for note in res.notes:
            console.print(f"note: {note}")
        anchors = "/".join(f"{p:g}" for p in sorted(plan.anchors))
        console.print(frame_table(fits_view(res.model.table(confidence), confidence),
                                  title=f"f_rw model per I/O size (fitted from {anchors}% "
                                        "read)"))
        console.print(frame_table(checks_view(check), title="total IOPS: predicted vs measured "
                                  f"({confidence:.0%} intervals)"))
        _warn(res.warnings)
        if save_model is not None:
            console.print(f"model written to {save_model}")
    if plot is not None:
        _save_plot(res.plot(), plot)


def _check_outputs(campaign: Path, outputs: dict[str, Path | None]) -> None:
    """Each output file can be written: checked before the runs, not after them. One in
    the campaign directory passes while that directory does not exist yet: the
    measurement creates it (`--campaign est --runs est/runs.csv`)."""
    from ..fileio import check_target

    home = campaign.resolve()
    for what, path in outputs.items():
        if path is None:
            continue
        if path.parent.resolve() == home and not home.exists():
            continue
        check_target(path, what)


def register(app: typer.Typer) -> None:
    estimate_app.command("fit")(fit_cmd)
    estimate_app.command("predict")(predict_cmd)
    estimate_app.command("measure")(measure_cmd)
    app.add_typer(estimate_app, name="estimate")
