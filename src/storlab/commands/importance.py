"""`storlab importance` (Carver's greedy parameter selection on a results table) and
`storlab importance-eval` (how small a study finds the same parameters, paper sec. 5.4)."""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from ..errors import AnalysisError
from ..fileio import read_table, save_figure
from ..limits import MAX_SEED
from ._common import (at_least, common_scale, console, emit_json, escape, frame_table,
                      input_file, output_file)

if TYPE_CHECKING:
    import pandas as pd


def split_names(value: Optional[str]) -> Optional[list[str]]:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    return items or None


def _pct1(v: float) -> str:
    return f"{v:.1%}" if math.isfinite(v) else "-"


def _pct2(v: float) -> str:
    return f"{v:.2%}" if math.isfinite(v) else "-"


def _sum(rows: list[dict[str, Any]], key: str) -> float:
    """The column's float sum, added as numpy (and pandas) add it."""
    import numpy as np

    return float(np.sum(np.array([r[key] for r in rows], dtype=float)))


def _texts(values: list[Any]) -> list[str]:
    """Values as text, as a table column shows them: numbers among which one is a float
    all as floats (4 beside 2.5 shows as 4.0), anything else as it is."""
    nums = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    if nums and any(isinstance(v, float) for v in values):
        return [str(float(v)) for v in values]
    return [str(v) for v in values]


def _save_plot(fig: Any, path: Path) -> None:
    save_figure(fig, path, dpi=120)


#: What importance says when it uses only a tuning campaign's screening runs.
SCREEN_NOTE = ("importance from the {n} screening runs of a tuning campaign; the search's "
               "runs are not a random sample")


def tuning_screen(source: Path) -> Optional[pd.DataFrame]:
    """A tuning campaign's screening runs (None for anything else). Carver's method assumes
    a space-filling or random sample; the local/TPE search holds factors at one value while
    it varies others, and on all runs a factor with no effect came out first."""
    from ._common import is_campaign

    if source.suffix.lower() not in (".yaml", ".yml") or not is_campaign(source):
        return None
    from ..campaign import Campaign

    camp = Campaign.load(source)
    if not camp.adaptive or not camp.store_path.exists():
        return None
    from ..tune import result_from_campaign

    return result_from_campaign(camp).screening_table()


def load_source(source: Path, space_file: Optional[Path], params: Optional[list[str]],
                response: str) -> tuple[pd.DataFrame, Optional[list[str]], str, str]:
    """The table to analyse, its parameter columns and the response's goal: from a campaign
    file (its run table, its space's factors and goals; a tuning campaign's screening runs
    only, see `tuning_screen`), a table with --space (the space's), or a bare table
    (parameters None: `storlab.analysis.importance.default_params` decides, or says it
    cannot; goal maximize), and a note on what the table is ("" when nothing to say)."""
    from ._common import results_source

    df, space = results_source(source, space_file)
    screen = tuning_screen(source) if space_file is None else None
    note = ""
    if screen is not None:
        if response in df.columns and response not in screen.columns:
            raise AnalysisError(f"{source}: no screening run of this tuning campaign has "
                                f"{response!r}")
        df, note = screen, SCREEN_NOTE.format(n=len(screen))
    goal = space.response(response).goal if space is not None else "maximize"
    if params is not None or space is None:
        return df, params, goal, note
    names = [n for n in space.names if n in df.columns]
    if not names:
        raise AnalysisError(f"{source}: none of the space's factors ({', '.join(space.names)}) "
                            "is a column of the table")
    return df, names, goal, note


@contextlib.contextmanager
def _one_blas_thread(wanted: bool) -> Iterator[None]:
    """numpy imported inside starts one OpenBLAS thread (when `wanted` and numpy is not
    loaded yet). OpenBLAS starts a worker per core at load, which spins at first: 0.05-0.09 s
    of CPU of a 1 s command (`benchmarks/bench_importance.py`) that does no linear algebra.
    The environment is restored after, so no child inherits the setting."""
    if not wanted or "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        yield
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


def importance_cmd(
    results: Path = typer.Argument(..., help="Results table (.csv, .parquet, .json) or a "
                                             "campaign file.",
                                   callback=input_file("results")),
    response: str = typer.Option(..., "--response", "-y", help="Response column to explain."),
    params: Optional[str] = typer.Option(None, "--params", "-p",
                                         help="Comma-separated parameter columns (default: "
                                              "the space's factors, or on a bare table every "
                                              "column but storlab's metrics and "
                                              "bookkeeping)."),
    space_file: Optional[Path] = typer.Option(None, "--space",
                                              help="Space YAML: its factors are the "
                                                   "parameters (with a results table).",
                                              callback=input_file("--space")),
    stop: str = typer.Option("rsd:0.02", "--stop",
                             help="top:N, rsd:X (best subset's RSD <= X) or gain:X (no "
                                  "parameter reduces variance by > X of the total); "
                                  "combine with commas."),
    aggregate: str = typer.Option("max", "--aggregate",
                                  help="CPI over the selected parameters' subsets: max "
                                       "(Carver's CPI) or mean (size-weighted; steadier "
                                       "on sampled data)."),
    goal: Optional[str] = typer.Option(None, "--goal",
                                       help="maximize or minimize (latency); default: the "
                                            "space's goal for the response, else maximize."),
    bins: int = typer.Option(4, "--bins", help="Strata for numeric parameters with many values.",
                             callback=at_least("--bins", 2)),
    json_out: bool = typer.Option(False, "--json/--no-json", help="Print JSON."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write JSON to a file.",
                                          callback=output_file("-o")),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Save the figure (png, svg, pdf).",
                                        callback=output_file("--plot")),
    compare: bool = typer.Option(False, "--compare/--no-compare",
                                 help="Also show ANOVA SS shares and (complete grids) Sobol "
                                      "S1/ST beside the PI shares."),
) -> None:
    """Which parameters matter: Carver's parameter importance (PI/CPI) and greedy selection."""
    plain_csv = space_file is None and not compare and results.suffix.lower() == ".csv"
    with _one_blas_thread(plain_csv):
        from ..analysis import importance_csv, importance_of as importance
    from ..metrics import is_metric  # (not through the runners' face: 0.03-0.06 s of imports)

    goal_full = {"max": "maximize", "min": "minimize"}.get(goal, goal) if goal else None
    res = None
    if plain_csv:
        # A plain CSV is read without pandas (its import alone was half the command's time);
        # None: the file or the analysis needs pandas, and the path below does it all.
        res = importance_csv(results, response, params=split_names(params), stop=stop,
                             aggregate=aggregate, goal=goal_full or "maximize",  # type: ignore[arg-type]
                             bins=bins, source=str(results), is_metric=is_metric)
    if res is not None:
        goal_full = goal_full or "maximize"
    else:
        df, names, space_goal, note = load_source(results, space_file, split_names(params),
                                                  response)
        goal_full = goal_full or space_goal
        res = importance(df, response, params=names, stop=stop, aggregate=aggregate,  # type: ignore[arg-type]
                         goal=goal_full, bins=bins, source=str(results),  # type: ignore[arg-type]
                         is_metric=is_metric)
        res.source_note = note
    if plot is not None:
        _save_plot(res.plot(), plot)
    cmp = None
    if compare:
        from ..analysis import compare_methods as compare_fn

        cmp = compare_fn(df, response, params=list(res.pi), bins=bins, source=str(results))
    if json_out or output:
        data = res.to_dict()
        if cmp is not None:
            data["compare"] = cmp.table()
        emit_json(data, output)
        if json_out:
            return
    head = (f"{results}: {res.n_configs} configurations ({res.n_rows} rows"
            + (f" of {res.n_rows + res.n_dropped}: {res.n_dropped} without {response} left "
               "out" if res.n_dropped else "")
            + f"); {response} ({goal_full}) mean {res.mean:.4g}, RSD {_pct2(res.rsd)}"
            + f"; {res.noise_note}")
    console.print(head, highlight=False)
    if res.source_note:
        console.print(f"note: {res.source_note}", highlight=False)
    if res.cells_note:
        console.print(f"note: {res.cells_note}", highlight=False)
    if res.held:
        console.print("note: constant on the rows with the response, so not ranked: "
                      + ", ".join(f"{k}={v}" for k, v in res.held.items()))
    for p, note in res.binned.items():
        console.print(f"note: {p}: {note}")
    # The tables from plain rows (no pandas: see above).
    tab = res.step_rows()
    if res.too_few:
        console.print("[yellow]too few configurations for a selection:[/] "
                      f"{escape(str(res.too_few))}", markup=True)
    elif tab:
        final = ", ".join(f"{k}={v}" for k, v in res.best_values().items())
        imp_text, imp_scale = common_scale([r["importance"] for r in tab])
        show = {
            "#": [r["rank"] for r in tab], "param": [r["param"] for r in tab],
            f"PI/CPI {imp_scale}".rstrip(): imp_text,
            "share": [_pct1(r["share"]) for r in tab],
            "best": _texts([r["best_value"] for r in tab]),
            "n left": [r["subset_n"] for r in tab],
            "mean": [f"{r['subset_mean']:.5g}" for r in tab],
            "RSD": [_pct2(r["subset_rsd"]) for r in tab]}
        console.print(frame_table(show, title=f"selected ({res.aggregate} CPI, stop {stop}); "
                                              "share: of the variance, explained by the "
                                              f"step (together {_pct1(_sum(tab, 'share'))}); "
                                              "n left/mean/RSD: configurations with the "
                                              "best values so far"))
        console.print(f"best values: {final}")
    if not res.too_few:
        console.print(f"stopped: {res.stop_reason}")
    pt = res.pi_rows()
    total = _sum(pt, "share")
    pi_text, pi_scale = common_scale([r["pi"] for r in pt])
    # Each PI is one parameter's share on its own: parameters that vary together in sampled
    # runs explain some variance twice, so the column need not add up to 100 %.
    console.print(frame_table({
        "param": [r["param"] for r in pt], f"pi {pi_scale}".rstrip(): pi_text,
        "share alone": [_pct1(r["share"]) for r in pt],
        "levels": [r["levels"] for r in pt]}, title=(
        "PI of every parameter, each on its own" + (
            f" (together {_pct1(total)}: these shares overlap, parameters that vary together "
            "in these runs explain the same variance; the selected steps above add up)"
            if total > 1.005 else f" (together {_pct1(total)})"))))
    if cmp is not None:
        ct = cmp.table()
        console.print(frame_table(ct, title="importance by other methods, each a share of the "
                                  "variance per parameter (PI and S1 first order; ST counts "
                                  "an interaction in each parameter it involves, so its "
                                  "column adds up to 100 % or more)"
                                  + ("" if cmp.complete_grid else
                                     "; Sobol needs a complete grid"), floatfmt="{:.3f}"))


def importance_eval_cmd(
    full: Path = typer.Argument(..., help="Complete results table (ground truth).",
                                callback=input_file("results")),
    response: str = typer.Option(..., "--response", "-y", help="Response column."),
    fractions: str = typer.Option("0.001,0.002,0.004,0.01,0.02,0.05", "--fractions",
                                  help="Comma-separated fractions of the dataset to sample."),
    repeats: int = typer.Option(1000, "--repeats", "-n", help="Repetitions per fraction.",
                                callback=at_least("--repeats", 1)),
    ranks: int = typer.Option(3, "--ranks", help="How many top ranks to check.",
                              callback=at_least("--ranks", 1)),
    params: Optional[str] = typer.Option(None, "--params", "-p",
                                         help="Comma-separated parameter columns."),
    aggregate: str = typer.Option("max", "--aggregate",
                                  help="CPI over the selected parameters' subsets: max "
                                       "(Carver's) or mean."),
    seed: int = typer.Option(0, "--seed", help="Seed; same seed, same table.",
                             callback=at_least("--seed", 0, MAX_SEED)),
    jobs: int = typer.Option(2, "--jobs", "-j", help="Worker processes.",
                             callback=at_least("--jobs", 1)),
    json_out: bool = typer.Option(False, "--json/--no-json", help="Print JSON."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write JSON to a file.",
                                          callback=output_file("-o")),
    plot: Optional[Path] = typer.Option(None, "--plot",
                                        help="Save the plot: how often each subset size "
                                             "finds the top parameters (png, svg, pdf).",
                                        callback=output_file("--plot")),
) -> None:
    """How often Carver's importance finds the full dataset's top parameters from small
    Latin Hypercube subsets of it."""
    from ..analysis import evaluate
    from ..campaign.runners import is_metric

    try:
        fr = [float(f) for f in fractions.split(",") if f.strip()]
    except ValueError:
        raise AnalysisError(f"--fractions: {fractions!r} is not a comma-separated list "
                            "of numbers") from None
    bad = [f for f in fr if not 0 < f <= 1]  # also catches nan
    if bad or not fr:
        raise AnalysisError(f"--fractions {fractions}: each must be in (0, 1]")
    from ._progress import task_progress

    df = read_table(full)
    with task_progress("importance-eval", quiet=json_out) as step:
        res = evaluate(df, response, fr, repeats=repeats, ranks=ranks, params=split_names(params),
                       aggregate=aggregate, seed=seed, n_jobs=jobs, source=str(full),  # type: ignore[arg-type]
                       progress=step, is_metric=is_metric)
    if plot is not None:
        _save_plot(res.plot(), plot)
    if json_out or output:
        emit_json(res.to_dict(), output)
        if json_out:
            return
    truth = ", ".join(f"{i + 1}. {p}" for i, p in enumerate(res.truth))
    console.print(f"{full}: {res.n_configs} configurations; ground truth ({res.aggregate} "
                  f"CPI on all of them): {truth}")
    console.print(frame_table(res.table(), title=f"fraction of {res.repeats} LHS-compatible "
                                                   f"subsets that found each rank "
                                                   f"({res.seconds:.1f} s)", floatfmt="{:.3f}"))


def register(app: typer.Typer) -> None:
    app.command("importance")(importance_cmd)
    app.command("importance-eval")(importance_eval_cmd)
