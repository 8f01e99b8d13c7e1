"""`storlab tune` (screen, tune, confirm: a measured recommendation in few runs),
`storlab confirm` (re-run configurations side by side and compare them) and `storlab
tune-eval` (replay tuning strategies against a complete measured table)."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Optional

import typer

from ..errors import StorlabError
from ..fileio import check_target, save_figure
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
) -> None:
    """Screen, tune, confirm: the best measured configuration, re-run and compared with the
    baseline (resumes like `storlab run`: run the same command again)."""
    from ..campaign.campaign import Campaign
    from ..campaign.storemeta import source_store
    from ..campaign.spec import load_spec
    from ..tune.result import result_from_campaign
    from ._progress import campaign_progress

    from ..design import KINDS

    spec = load_spec(campaign_file)
    d = spec.design
    notes: list[str] = []  # what the command changed on the way, said at the end
    if d.kind is not None and d.kind != "tune" and d.kind not in KINDS:
        raise StorlabError(f"{campaign_file}: field design.kind: {d.kind!r} must be one of "
                           f"{', '.join(KINDS)} or tune")
    update: dict[str, Any] = {}
    if d.kind != "tune":
        if budget is None:
            raise StorlabError(f"{campaign_file}: its design is not a tuning one; give "
                               "--budget N to tune over its space")
        d = d.with_source(kind="tune")
        if spec.store == "campaign.db":  # never mix with the fixed design's runs
            spec = spec.model_copy(update={"store": source_store(campaign_file, "tune")})
        if spec.repetitions != 1:  # said (terminal and JSON notes), not dropped in silence
            notes.append(f"the fixed design's repetitions: {spec.repetitions} do not apply "
                         "to tuning (its confirmation re-runs the candidates)")
            spec = spec.model_copy(update={"repetitions": 1})
    if budget is not None:
        update["budget"] = budget
    if strategy is not None:
        update["strategy"] = strategy
    if seed is not None:
        update["seed"] = seed
    if confirm_share is not None:
        update["confirm_share"] = confirm_share
    if response:
        objs: list[Any] = []
        for r in response:
            name, _, goal = r.partition(":")
            objs.append({"name": name, "goal": goal} if goal else name)
        update["objectives"] = objs
    if update:
        spec = spec.model_copy(update={"design": d.model_copy(update=update)})
    if optuna_storage is not None and not re.match(r"^[a-z][a-z0-9+]*://", optuna_storage):
        raise StorlabError(f"--optuna-storage {optuna_storage!r}: not a database URL (an "
                           "Optuna RDB storage such as sqlite:///study.db)")
    if optuna_storage is not None and optuna_storage.startswith("sqlite:///"):
        # SQLite writes through a link and into a device as into a file (a study.db linked
        # to /dev/loop0 had a database written over the device's first blocks)
        db = optuna_storage[len("sqlite:///"):]
        if os.path.islink(db):
            raise StorlabError(f"--optuna-storage {optuna_storage}: {db} is a symbolic link; "
                               "name the database file itself")
        if db and db != ":memory:":
            check_target(db, "--optuna-storage")
    camp = Campaign(spec, campaign_file)
    done = _runs_done(camp)
    budget_now = int(camp.source.meta()["budget"])  # type: ignore[union-attr]
    if done > budget_now:
        raise StorlabError(f"{camp.store_path}: already holds {done} tuning runs; a budget "
                           f"of {budget_now} cannot take them back")
    with campaign_progress(f"{camp.name} (tune)", quiet, json_out,
                           tuple(o.name for o in camp.source.objectives)  # type: ignore[union-attr]
                           ) as on_event:
        summary = camp.run(executor=executor, on_event=on_event, wait=wait)
    res = result_from_campaign(camp)
    # Warm-ups are not in the history the strategy counts: said beside the budget. Only
    # those that finished or failed: one cut off while running under a key no resume asks
    # for again (an earlier storlab's c<c>-w<i>) stays 'running' in the store for good.
    from ..campaign.store import DONE, FAILED

    warm = sum(bool(r["warmup"]) and r["status"] in DONE + FAILED
               for r in camp.stored_runs(warmup=True))
    data = {"campaign": str(camp.path), "store": str(camp.store_path), **res.to_dict(),
            "warmup_runs": warm, "interrupted": summary.interrupted}
    data["notes"] = notes + data["notes"]
    if optuna_storage is not None:  # interrupted too: the runs so far are worth a look
        from ..tune.optuna_export import export_study

        n = export_study(res, camp.space, optuna_storage, camp.name,
                         {r["key"]: (r["started"], r["ended"]) for r in camp.stored_runs()})
        data["optuna"] = {"storage": optuna_storage, "study": camp.name, "trials": n}
    if summary.interrupted:
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


def _runs_done(camp: Any) -> int:
    """Measured runs a tuning store already holds, finished or failed, as its history
    counts them (0 without a store): read through the campaign, never a Store of our own."""
    from ..campaign.store import DONE, FAILED

    return sum(r["status"] in DONE + FAILED for r in camp.stored_runs())


def _print_tune(res: Any, data: dict[str, Any], units: dict[str, str]) -> None:
    from ..tune.result import change_text

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
        parts = [f"{objs[0]} {_num(e['value'])} +/- {_num(e['std'])} {units[objs[0]]}"]
        parts += [f"{o} {_num(e[o]['mean'])} +/- {_num(e[o]['std'])} {units[o]}"
                  for o in objs[1:]]
        text = "; ".join(p.rstrip() for p in parts)
        if e.get("value_from") == "confirmation runs":
            return (text + f" over {e['runs']} confirmation runs (all {e['runs_all']} runs: "
                    f"{_num(e['value_all_runs'])})")
        return text + f" over {e['runs']} runs"

    if b is None:
        console.print("no run produced a value: nothing to recommend (see `storlab status "
                      "--failures`)")
        return
    for n in data.get("notes", []):
        console.print(f"note: {n}", highlight=False)
    console.print(f"recommended (measured): {_config_text(b['config'])}")
    console.print(f"  {measured(b)}")
    from ..tune.result import race_lines

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
def parse_config(text: str, space: Any, what: str) -> dict[str, Any]:
    """`k=v,k=v` into the space's values (a listed value as listed, else a number)."""
    from ..jsonutil import plain

    out: dict[str, Any] = {}
    for part in [p for p in text.split(",") if p.strip()]:
        k, eq, v = part.partition("=")
        k, v = k.strip(), v.strip()
        if not eq or not k:
            raise StorlabError(f"{what} {text!r}: write factor=value pairs separated by commas")
        if k not in space:
            raise StorlabError(f"{what}: {k!r} is not a factor (factors: "
                               f"{', '.join(space.names)})")
        f = space[k]
        levels = f.levels
        match = [plain(x) for x in levels or [] if str(x) == v]
        if match:
            out[k] = match[0]
        else:
            try:
                x = float(v)
            except ValueError:
                raise StorlabError(f"{what}: {k}={v!r} is not one of {levels}") from None
            out[k] = int(x) if x.is_integer() and f.kind in ("integer", "ordinal") else x
            if levels is not None:
                near = [plain(lv) for lv in levels if isinstance(plain(lv), (int, float))
                        and float(plain(lv)) == x]
                if near:
                    out[k] = near[0]
    missing = [n for n in space.names if n not in out]
    if missing:
        raise StorlabError(f"{what}: give every factor; missing {', '.join(missing)}")
    try:
        space.validate(out)
    except StorlabError as exc:
        raise StorlabError(f"{what}: {exc}") from None
    return {n: out[n] for n in space.names}


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
) -> None:
    """Re-run configurations in random interleaved order and compare them (Welch's t-test)."""
    from ..campaign.campaign import Campaign, campaign_space
    from ..campaign.sources import config_key
    from ..campaign.spec import load_spec
    from ..tune.result import Comparison, change_text, describe
    from ._progress import campaign_progress

    spec = load_spec(campaign_file)
    space = campaign_space(spec, campaign_file)
    configs = [parse_config(c, space, "--config") for c in config]
    ref = parse_config(against, space, "--against") if against else None
    allc = configs + ([ref] if ref is not None else [])
    if len({config_key(c) for c in allc}) != len(allc):
        raise StorlabError("the same configuration is given twice")
    from ..tune.tune_source import check_metrics, declared_goal, objectives_given

    name, _, goal = (response or (space.responses[0].name if space.responses else "")
                     ).partition(":")
    if not name:
        raise StorlabError("name the response to compare with --response")
    if goal not in ("", "maximize", "minimize"):
        raise StorlabError(f"--response {response}: the goal must be maximize or minimize")

    design = spec.design.with_source(configs=allc, budget=None)
    spec = spec.model_copy(update={"design": design, "repetitions": runs, "randomize": True,
                                   "seed": seed, "store": store,
                                   "name": f"{spec.name or Path(campaign_file).stem}-confirm"})
    camp = Campaign(spec, campaign_file)
    # before anything runs (it ran every run, then said no run produced it)
    check_metrics(camp.preflight(), [name])
    # the goal given, else the file's objectives' (a tuning file says {p99: minimize}),
    # else the space's declaration
    file_goals = {o.name: o.goal for o in objectives_given(spec.design.objectives)}
    goal = goal or file_goals.get(name) or declared_goal(space, name)
    with campaign_progress(camp.name, quiet, json_out, (name,)) as on_event:
        try:
            summary = camp.run(executor=executor, on_event=on_event, wait=wait)
        except StorlabError as exc:
            if "holds another plan" in str(exc):  # another set of configurations
                raise StorlabError(f"{camp.store_path}: holds the runs of other "
                                   "configurations; give this comparison its own "
                                   "--store FILE") from None
            raise
    from ..campaign.store import FAILED

    df = camp.results("run")
    groups = []
    for cid, cfg, _ in camp.configs:
        mine = df[df["config_id"] == cid] if len(df) else df
        ok = mine[mine["status"] == "ok"] if len(mine) else mine
        vals = [float(v) for v in ok.get(name, []) if isinstance(v, (int, float))
                and math.isfinite(v)]
        # A mean over the one run of four that worked is no mean of four: count the rest.
        failed = int(mine["status"].isin(FAILED).sum()) if len(mine) else 0
        groups.append((cfg, vals, failed, len(ok) - len(vals)))
    if all(not v for _, v, _, _ in groups):
        raise StorlabError(f"no run produced {name!r}: see `storlab status --failures` "
                           f"(store {camp.store_path})")
    base = groups[-1] if ref is not None else None
    rows = []
    for i, (cfg, vals, failed, no_value) in enumerate(groups):
        role = "reference" if base is not None and i == len(groups) - 1 else f"config {i + 1}"
        row: dict[str, Any] = {"role": role, "config": cfg, **describe(vals),
                               "failed_runs": failed, "runs_without_value": no_value}
        if base is not None and i < len(groups) - 1 and vals and base[1]:
            row["comparison"] = Comparison(name, goal, vals, base[1]).to_dict()
        rows.append(row)
    short = [r for r in rows if r["failed_runs"] or r["runs_without_value"]]
    notes = [f"{r['role']}: {r['runs']} of {r['runs'] + r['failed_runs'] + r['runs_without_value']}"
             f" runs gave {name}"
             + (f"; {r['failed_runs']} failed" if r["failed_runs"] else "")
             + (f"; {r['runs_without_value']} ran without a value of {name}"
                if r["runs_without_value"] else "")
             for r in short]
    data = {"response": name, "goal": goal, "store": str(camp.store_path), "runs": runs,
            "configs": rows, "notes": notes, "interrupted": summary.interrupted}
    if json_out or output:
        emit_json(data, output)
    if not json_out:
        import pandas as pd

        console.print(frame_table(pd.DataFrame([{
            "role": r["role"], **r["config"], f"{name} mean": r["mean"],
            f"{name} sd": r["std"], "runs": _runs_text(r)} for r in rows]),
            title=f"{name} ({goal}), interleaved runs"))
        for n in notes:
            console.print(f"note: {n}", highlight=False)
        for r in rows:
            if "comparison" in r:
                c, unit = r["comparison"], space.response(name).unit
                console.print(f"{r['role']} vs reference: "
                              f"{change_text(c['change'], c['difference'], unit)}, "
                              f"{c['verdict']}")
    if summary.interrupted:
        raise typer.Exit(130)


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
    from ..tune.evaluate import MEDIAN_RULE, tune_eval
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
