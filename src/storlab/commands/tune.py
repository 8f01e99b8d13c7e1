"""`storlab tune` (screen, tune, confirm: a measured recommendation in few runs),
`storlab confirm` (re-run configurations side by side and compare them) and `storlab
tune-eval` (replay tuning strategies against a complete measured table)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

import typer

from ..errors import StorlabError
from ..fileio import save_figure
from .campaign import failed_runs_exit
from ._common import (at_least, console, emit_json, fitted_tables, frame_table, input_file,
                      output_file)


def _save_plot(fig: Any, path: Path) -> None:
    save_figure(fig, path, dpi=120)  # temp + rename


def share_option(option: str) -> Any:
    """A share strictly between 0 and 1 (None passes)."""
    def check(value: Any) -> Any:
        if value is not None and not (isinstance(value, (int, float)) and 0 < value < 1):
            raise StorlabError(f"{option} {value}: must be between 0 and 1, both excluded")
        return value
    return check


def _num(v: float) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.4g}"


def _quantity(mean: Any, sd: Any, unit: str) -> str:
    """`mean +/- sd unit` (without `sd`: `mean unit`); "n/a" alone when there is no mean,
    not "n/a MB/s"."""
    if _num(mean) == "n/a":
        return "n/a"
    sd_text = "" if sd is None else f" +/- {_num(sd)}"
    return f"{_num(mean)}{sd_text} {unit}".rstrip()


def _config_text(cfg: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in cfg.items())


# --------------------------------------------------------------------------- tune
def tune_cmd(
    campaign_file: Path = typer.Argument(..., help="Campaign YAML file (a fixed design "
                                                   "is turned into a tuning one)."),
    budget: Optional[int] = typer.Option(None, "--budget", "-b", min=1, max=100_000,
                                         help="Runs to execute in all (screening, search, "
                                              "confirmation, every repetition)."),
    strategy: Optional[str] = typer.Option(None, "--strategy",
                                           help="auto, screen-then-tune, tpe, gp, nsga2, "
                                                "random."),
    response: Optional[list[str]] = typer.Option(None, "--response", "-y",
                                                 help="Objective(s): NAME, NAME:minimize or "
                                                      "NAME:maximize (repeat for two); a "
                                                      "response the space does not declare "
                                                      "needs its goal."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed (default: the file's).",
                                       callback=at_least("--seed", 0, 2**32 - 1)),
    confirm_share: Optional[float] = typer.Option(
        None, "--confirm-share", help="Share of the budget kept for racing the leading "
        "candidates, between 0 and 1 exclusive (default: the file's, else 0.5).",
        callback=share_option("--confirm-share")),
    executor: str = typer.Option("sequential", "--executor", "-e",
                                 help="sequential, parallel[:N], or dask://host:port."),
    quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", help="No progress display."),
    wait: bool = typer.Option(False, "--wait/--no-wait", help="Wait for another storlab holding "
                                                    "this campaign instead of exiting."),
    json_out: bool = typer.Option(False, "--json/--no-json", help="Print the result as JSON."),
    output: Optional[Path] = typer.Option(None, "-o", "--output",
                                          help="Write the result JSON to a file.",
                                          callback=output_file("-o")),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Save the convergence (and "
                                                             "Pareto) plot.",
                                        callback=output_file("--plot")),
    optuna_storage: Optional[str] = typer.Option(
        None, "--optuna-storage", help="Also write every run as a trial of an Optuna study "
        "named after the campaign in this Optuna RDB storage (sqlite:///study.db), for "
        "optuna-dashboard and optuna.load_study."),
    fail_on_error: bool = typer.Option(False, "--fail-on-error/--no-fail-on-error",
                                       help="Exit 1 when any run of this invocation failed."),
) -> None:
    """Screen, tune, confirm: the best measured configuration, re-run and compared with the
    baseline (resumes like `storlab run`: run the same command again). Exits 1 when every
    run of this invocation failed or nothing can be recommended (with --fail-on-error:
    when any run failed)."""
    from ..tune import Tuning
    from ._progress import campaign_progress

    tuning = Tuning(campaign_file, budget=budget, strategy=strategy, objectives=response,
                    seed=seed, confirm_share=confirm_share, optuna_storage=optuna_storage)
    camp = tuning.campaign
    with campaign_progress(f"{camp.name} (tune)", quiet, json_out, tuning.objectives
                           ) as on_event:
        out = tuning.run(executor=executor, on_event=on_event, wait=wait)
    res, data = out.result, out.data
    if out.interrupted:
        if not json_out:
            console.print(f"interrupted after {len(res.history)} of {res.budget} runs, before "
                          "the answer was confirmed: run the same command again to resume")
        if json_out or output:
            emit_json(data, output)
        raise typer.Exit(130)
    if "confirm" in data["phases"] and len(res.history) < res.budget and not json_out \
            and data.get("race") is None:
        console.print(f"the tuning ended with its confirmation at {len(res.history)} runs; "
                      f"a larger budget does not reopen it (tune into a new store, "
                      "'store:' in the campaign file, to search again)")
    if plot is not None and res.history:
        _save_plot(res.plot(), plot)
    if json_out or output:
        emit_json(data, output)
    if not json_out:
        _print_tune(res, data, {o.name: camp.space.response(o.name).unit for o in res.objectives})
        if "optuna" in data:
            console.print(f"wrote {data['optuna']['trials']} runs as trials of the Optuna "
                          f"study {camp.name!r} in {optuna_storage} (optuna-dashboard "
                          f"{optuna_storage})")
    s = out.summary
    code = failed_runs_exit(s.ran, s.ok, s.failed, campaign_file, fail_on_error, json_out,
                            f"see why: storlab status {campaign_file} --store "
                            f"{Path(data['store']).name} --failures")
    if code or data["best"] is None:  # no recommendation: the command did not do its job
        raise typer.Exit(1)


def _print_tune(res: Any, data: dict[str, Any], units: dict[str, str]) -> None:
    from ..tune import change_text

    ph = ", ".join(f"{k} {v}" for k, v in data["phases"].items())
    warm = (f" + {data['warmup_runs']} warm-up runs (not counted in the budget)"
            if data.get("warmup_runs") else "")
    console.print(f"{data['strategy']}: {data['runs']} of {data['budget']} runs ({ph}){warm}; "
                  f"store {data['store']}")
    t = res.table()
    if len(t):
        # Only the factors the candidates disagree on: the others are said once.
        factors = [c for c in t.columns if c in res.history[0].config]
        same = [c for c in factors if t[c].astype(str).nunique() == 1]
        t = t.drop(columns=same)
        title = "confirmed configurations (best first)"
        if same:
            title += "; all have " + ", ".join(f"{c}={t0}" for c, t0 in
                                               zip(same, res.table()[same].iloc[0]))
        # split by columns when wider than the terminal (rich wrapped the role column)
        for part in fitted_tables(t, console.width, title=title):
            console.print(part)
    b, base, cmp = data["best"], data["baseline"], data["comparison"]
    objs = [o["name"] for o in data["objectives"]]

    def measured(e: dict[str, Any]) -> str:
        """Every objective's mean +/- sd with its unit, and the runs."""
        parts = [f"{objs[0]} {_quantity(e['value'], e['std'], units[objs[0]])}"]
        parts += [f"{o} {_quantity(e[o]['mean'], e[o]['std'], units[o])}" for o in objs[1:]]
        text = "; ".join(parts)
        if e.get("value_from") == "confirmation runs":
            # the all-runs mean written as the value is: 4.34 MB/s, not a bare 4.34
            every = _quantity(e["value_all_runs"], None, units[objs[0]])
            return text + f" over {e['runs']} confirmation runs (all {e['runs_all']} runs: " \
                f"{every})"
        return text + f" over {e['runs']} runs"

    if b is None:
        console.print("no run produced a value: nothing to recommend (see `storlab status "
                      "--failures`)")
        return
    for n in data.get("notes", []):
        console.print(f"note: {n}", highlight=False)
    console.print(f"recommended (measured): {_config_text(b['config'])}")
    console.print(f"  {measured(b)}")
    from ..tune import race_lines

    for line in race_lines(data, units[objs[0]]):
        console.print(f"  {line}", highlight=False)
    if base is not None:
        console.print(f"baseline ({base['kind']}): {measured(base)}")
    if cmp is not None:
        if b["config"] == (base or {}).get("config"):
            console.print("the baseline is the best measured configuration")
        else:
            console.print(f"recommended vs baseline: "
                          f"{change_text(cmp['change'], cmp['difference'], units[objs[0]])} "
                          f"{objs[0]}, {cmp['verdict']}")
    scr, cs = data.get("best_screened"), data.get("comparison_screened")
    if scr is not None and cs is not None and scr["config"] != b["config"]:
        console.print(f"best screened: {measured(scr)}; recommended vs best screened: "
                      f"{change_text(cs['change'], cs['difference'], units[objs[0]])}, "
                      f"{cs['verdict']}")
    if data["pareto"]:
        # runs in all (runs_all), as the confirmation phase counts them: "runs" is only
        # the confirmation runs, one fewer, and said "0 of them" beside three with 2
        n_conf = sum(p["confirmed"] for p in data["pareto"])
        console.print(f"Pareto front: {len(data['pareto'])} measured configurations, "
                      f"{n_conf} of them confirmed with {res.confirm_runs}+ runs "
                      "(--json for all; the recommendation is the best on "
                      f"{objs[0]})")


# --------------------------------------------------------------------------- confirm
def confirm_cmd(
    campaign_file: Path = typer.Argument(..., help="Campaign YAML file (its space, runner "
                                                   "and steps are used)."),
    config: list[str] = typer.Option(..., "--config", "-c",
                                     help="A configuration factor=value,... (repeatable)."),
    against: Optional[str] = typer.Option(None, "--against", "-a",
                                          help="The reference configuration factor=value,..."),
    runs: int = typer.Option(3, "--repeats", "--runs", "-n", min=2, max=1000,
                             help="Runs of each configuration (interleaved at random)."),
    response: Optional[str] = typer.Option(None, "--response", "-y",
                                           help="Response to compare: NAME, NAME:minimize "
                                                "or NAME:maximize (default: the space's "
                                                "first); an undeclared one needs its goal."),
    store: str = typer.Option("confirm.db", "--store",
                              help="Store file, next to the campaign file (resumable)."),
    seed: int = typer.Option(7, "--seed", help="Seed of the interleaved order.",
                             callback=at_least("--seed", 0, 2**32 - 1)),
    executor: str = typer.Option("sequential", "--executor", "-e",
                                 help="sequential, parallel[:N], or dask://host:port."),
    quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", help="No progress display."),
    wait: bool = typer.Option(False, "--wait/--no-wait", help="If another storlab runs this "
                              "comparison's store, wait for it to finish instead of "
                              "refusing."),
    json_out: bool = typer.Option(False, "--json/--no-json", help="Print JSON."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write JSON to a file.",
                                          callback=output_file("-o")),
    fail_on_error: bool = typer.Option(False, "--fail-on-error/--no-fail-on-error",
                                       help="Exit 1 when any run of this invocation failed."),
) -> None:
    """Re-run configurations in random interleaved order and compare them (Welch's t-test).
    Exits 1 when no run gave the response or every run of this invocation failed (with
    --fail-on-error: when any run failed)."""
    from ..tune import Confirmation
    from ..tune import change_text
    from ._progress import campaign_progress

    conf = Confirmation(campaign_file, config, against, runs=runs, response=response,
                        store=store, seed=seed)
    name = conf.response
    with campaign_progress(conf.campaign.name, quiet, json_out, (name,)) as on_event:
        out = conf.run(executor=executor, on_event=on_event, wait=wait)
    rows, notes = out.rows, out.notes
    if json_out or output:
        emit_json(out.to_dict(), output)
    if not json_out:
        import pandas as pd

        console.print(frame_table(pd.DataFrame([{
            "role": r["role"], **r["config"], f"{name} mean": r["mean"],
            f"{name} sd": r["std"], "runs": _runs_text(r)} for r in rows]),
            title=f"{name} ({out.goal}), interleaved runs"))
        for n in notes:
            console.print(f"note: {n}", highlight=False)
        for r in rows:
            if "comparison" in r:
                c = r["comparison"]
                console.print(f"{r['role']} vs reference: "
                              f"{change_text(c['change'], c['difference'], out.unit)}, "
                              f"{c['verdict']}")
    if out.interrupted:
        raise typer.Exit(130)
    s = out.summary
    code = failed_runs_exit(s.ran, s.ok, s.failed, campaign_file, fail_on_error, json_out,
                            f"see why: storlab status {campaign_file} --store {store} "
                            "--failures")
    if code:
        raise typer.Exit(code)


def _runs_text(r: dict[str, Any]) -> str:
    """'1 (3 failed)': the runs with a value and, when any, those that gave none."""
    extra = [f"{r['failed_runs']} failed"] if r["failed_runs"] else []
    if r["runs_without_value"]:
        extra.append(f"{r['runs_without_value']} without value")
    return f"{r['runs']}" + (f" ({', '.join(extra)})" if extra else "")


# --------------------------------------------------------------------------- tune-eval
def tune_eval_cmd(
    full: Path = typer.Argument(..., help="Complete measured table (.csv, .parquet, .json).",
                                callback=input_file("table")),
    response: str = typer.Option(..., "--response", "-y", help="Response column."),
    goal: str = typer.Option("maximize", "--goal", help="maximize or minimize."),
    params: Optional[str] = typer.Option(None, "--params", "-p",
                                         help="Comma-separated parameter columns (default: "
                                              "every other column)."),
    budget: int = typer.Option(60, "--budget", "-b", min=2, max=10_000,
                               help="Runs per tuning."),
    repeats: int = typer.Option(30, "--repeats", "-n", min=1, max=10_000,
                                help="Tunings per strategy (different seeds)."),
    strategies: str = typer.Option("storlab,optuna-tpe,random", "--strategies",
                                   help="Comma-separated: storlab (auto), auto, "
                                        "screen-then-tune, tpe, gp (needs PyTorch), nsga2 "
                                        "(storlab's strategies), optuna-tpe (Optuna alone, "
                                        "every trial a run), optuna-tpe-norepeat (a repeat "
                                        "is told its earlier value, no run), random (uniform "
                                        "draws)."),
    noise: float = typer.Option(0.0, "--noise", help="Lognormal noise on each measured run: "
                                                     "the table value times exp(NOISE x "
                                                     "N(0,1)) (0 to 1).",
                                callback=at_least("--noise", 0.0, 1.0)),
    confirm_share: float = typer.Option(0.5, "--confirm-share",
                                        help="Share of storlab's budget kept for racing "
                                             "(0 to 1, both excluded).",
                                        callback=share_option("--confirm-share")),
    seed: int = typer.Option(0, "--seed", help="Seed.", callback=at_least("--seed", 0, 2**32 - 1)),
    json_out: bool = typer.Option(False, "--json/--no-json", help="Print JSON."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write JSON to a file.",
                                          callback=output_file("-o")),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Save the convergence plot.",
                                        callback=output_file("--plot")),
) -> None:
    """How many runs each tuning strategy needs to get within 1 % and 5 % of a complete
    table's optimum (the table is the oracle)."""
    from ..fileio import read_table
    from ..tune import MEDIAN_RULE, tune_eval
    from .importance import split_names

    df = read_table(full, "table")
    names = split_names(strategies) or []
    res = tune_eval(df, response, goal=goal, params=split_names(params), strategies=names,
                    budget=budget, repeats=repeats, seed=seed, noise=noise,
                    confirm_share=confirm_share)
    if plot is not None:
        _save_plot(res.plot(), plot)
    if json_out or output:
        emit_json(res.to_dict(), output)
    if not json_out:
        console.print(f"{full}: {res.n_configs} configurations, optimum {response} "
                      f"{res.optimum:.6g} ({goal}); budget {budget}, {repeats} repeats")
        # every other column is a parameter unless --params says: a metric column (lat
        # beside y) would silently become one
        how = "given by --params" if params else f"every column but {response}; --params " \
                                                 "to choose"
        console.print(f"parameters: {', '.join(res.params)} ({how})", highlight=False)
        t = res.table()
        t["median_runs"] = [f"{v:g}" if v == v else "n/a" for v in t["median_runs"]]
        console.print(frame_table(t, title="runs to reach within target of the "
                                           f"optimum (median; {MEDIAN_RULE})"))
        console.print("recommended_share: tunings whose recommended configuration (storlab's "
                      "answer; a baseline's best observation) is truly within the target; "
                      "median_recommended_gap: its true gap"
                      + (f" (noise {noise:g}, lognormal)" if noise else ""), highlight=False)


def register(app: typer.Typer) -> None:
    app.command("tune")(tune_cmd)
    app.command("confirm")(confirm_cmd)
    app.command("tune-eval")(tune_eval_cmd)
