"""`storlab design` and `storlab analyze`: experiment designs and their effect analysis."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional


import typer

from ..errors import AnalysisError, DesignError, NotTwoLevel, StorlabError
from ..limits import MAX_FACTORS, MAX_RUNS, MAX_SEED
from ..fileio import make_output_dir, read_table, save_figure, write_frame
from ._common import (at_least, console, emit_json, escape, fitted_tables, fraction,
                      frame_table, input_file, output_dir, output_file)

# Heavy libraries (statsmodels, matplotlib) load inside the commands, so that `storlab`
# starts quickly whatever command runs.
KINDS = ("full", "fractional", "pb", "lhs")
PLOT_KINDS = ("pareto", "halfnormal", "main", "interaction")

def _resolution(text: str | None) -> int | None:
    if text is None:
        return None
    from ..design import parse_resolution

    try:
        return parse_resolution(text)
    except ValueError as exc:
        raise DesignError(f"--{exc}") from None


def design_cmd(
    space_file: Optional[Path] = typer.Argument(None, help="Space YAML file.",
                                                callback=input_file("space file")),
    kind: Optional[str] = typer.Option(None, "--kind", "-k",
                                       help=f"One of {', '.join(KINDS)} (default: fractional; "
                                            "full with --follow-up)."),
    factors: Optional[int] = typer.Option(None, "--factors",
                                          help="K two-level factors A, B, ... (no space file).",
                                          callback=at_least("--factors", 1, MAX_FACTORS)),
    runs: Optional[int] = typer.Option(None, "--runs", "-n", help="Run budget / PB size / LHS size.",
                                       callback=at_least("--runs", 1, MAX_RUNS)),
    resolution: Optional[str] = typer.Option(None, "--resolution", "-r",
                                             help="Minimum resolution: III, IV, V."),
    generator: list[str] = typer.Option([], "--generator", "-g",
                                        help="Generator such as E=ABC (repeatable)."),
    center: int = typer.Option(0, "--center", help="Center points (numeric factors).",
                               callback=at_least("--center", 0, MAX_RUNS)),
    replicates: int = typer.Option(1, "--replicates", help="Copies of the whole design.",
                                   callback=at_least("--replicates", 1, MAX_RUNS)),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed for run order and sampling.",
                                       callback=at_least("--seed", 0, MAX_SEED)),
    randomize: bool = typer.Option(True, "--randomize/--no-randomize",
                                   help="Shuffle the run order (--no-randomize: standard order)."),
    optimize: Optional[str] = typer.Option(None, "--optimize",
                                           help="LHS space-filling: random-cd or lloyd."),
    fold: Optional[str] = typer.Option(None, "--foldover",
                                       help="Append a foldover: 'all' or a factor name."),
    json_out: bool = typer.Option(False, "--json/--no-json", help="Print JSON."),
    output: Optional[Path] = typer.Option(None, "-o", "--output",
                                          help="Write the run table (.csv) or JSON (.json).",
                                          callback=output_file("-o")),
    follow_up: Optional[Path] = typer.Option(
        None, "--follow-up", help="Screening results (a campaign YAML, or a results table "
        "with the space file): design on its --top factors by main effect.",
        callback=input_file("--follow-up")),
    top: int = typer.Option(3, "--top", help="With --follow-up: how many factors to keep.",
                            callback=at_least("--top", 1, MAX_FACTORS)),
    response: Optional[str] = typer.Option(None, "--response", "-y",
                                           help="With --follow-up: the response that ranks "
                                                "the factors (default: the space's first)."),
) -> None:
    """Generate a design: full, fractional (2^(k-p)), pb (Plackett-Burman) or lhs; with
    --follow-up, on the key factors of a screening's results (the step after screening)."""
    from ..design import make_design
    from ..space import Space

    ranking = inter = None
    if follow_up is not None:
        space, ranking, response, inter = _follow_up_space(follow_up, space_file, factors,
                                                           top, response)
        kind = kind or "full"
    else:
        if (space_file is None) == (factors is None):
            raise StorlabError("give a space file or --factors K (not both)")
        space = Space.from_yaml(space_file) if space_file else Space.two_level(factors)  # type: ignore[arg-type]
    kind = kind or "fractional"
    d = make_design(space, kind, runs=runs, resolution=_resolution(resolution),
                    generators=generator or None, center=center, replicates=replicates,
                    seed=seed, randomize_order=randomize, optimize=optimize, fold=fold)
    if output is not None and output.suffix != ".json":
        write_frame(d.export_table(), output, fmt="csv")
    note = correction = None
    if ranking is not None:
        from ..analysis import CORRECTION, correction_text, follow_up_note

        note = "; ".join(n for n in (follow_up_note(ranking, top), inter) if n) or None
        correction = correction_text(ranking)
    if json_out or (output is not None and output.suffix == ".json"):
        data = d.to_dict()
        if ranking is not None:
            data["follow_up"] = {"response": response, "top": top,
                                 "ranking": ranking.to_dict("records"),
                                 "correction": CORRECTION.lower(),
                                 "correction_text": correction, "note": note}
        emit_json(data, output if output is not None and output.suffix == ".json" else None)
        return
    from ..design import roman

    m = d.meta
    if ranking is not None:
        console.print(frame_table(ranking, title=f"screening: main effects on {response}"))
        console.print(correction)
        console.print(f"follow-up on the top {top}: {', '.join(space.names)}")
        if note:
            console.print(f"[yellow]note:[/] {escape(str(note))}", markup=True)
    head = f"[bold]{escape(str(m['kind']))}[/] design: {d.runs} runs, {space.k} factors"
    if m.get("resolution"):
        head += escape(f", resolution {m.get('resolution_roman') or roman(m['resolution'])}")
    if m.get("construction"):
        head += escape(f" ({m['construction']})")
    console.print(head, markup=True)
    if m.get("generators"):
        console.print("generators: " + ", ".join(m["generators"]))
        rel = m["defining_relation"]
        # thousands of words for many factors: the first ones, the rest are in --json
        console.print("defining relation: I = " + " = ".join(rel[:DEF_WORDS])
                      + (f" = ... ({len(rel)} words listed"
                         + (f", {m['defining_relation_note']}" if m.get("defining_relation_note")
                            else "") + "; all in --json)" if len(rel) > DEF_WORDS else ""))
    if m.get("folded"):  # the generators above are the folded design's, read off it
        f = m["folded"]
        console.print(f"folded over {m['foldover']}: the fraction "
                      + ", ".join(f["generators"])
                      + (f" (resolution {roman(f['resolution'])})" if f.get("resolution")
                         else "") + " and its mirror image, block 2")
    if "block_generator" in m:
        bg = m["block_generator"]
        console.print(f"blocks: {bg} (block 1 at -1, block 2 at +1)" if bg else
                      "blocks: the foldover repeats the runs (no effect is confounded "
                      "with blocks)")
    if "wlp" in m and m["kind"] != "full":
        console.print(f"word-length pattern (A1..): {m['wlp']}   clear 2FIs: {m['clear_2fi']}")
    if m.get("search"):
        s = m["search"]
        if s.get("warning"):
            console.print(f"[bold yellow]warning:[/] {escape(str(s['warning']))}", markup=True)
        elif s.get("source") == "catalogue":
            console.print("generators: storlab's minimum-aberration catalogue (exact search, "
                          "stored; scripts/ma_catalogue.py)")
        if s.get("source") != "catalogue":
            console.print(f"search: {'exact' if s['exact'] else 'time-limited'}, "
                          f"{s['nodes']} nodes, {s['seconds']} s")
    if m.get("aliases"):
        from ..design import alias_chains

        # each chain once: the mapping lists A = BD = CE under A, BD and CE
        chains = alias_chains(m["aliases"])
        console.print("alias chains (to 2FIs): "
                      + "; ".join(" = ".join(c) for c in chains[:ALIAS_CHAINS])
                      + (f"; ... ({len(chains)} chains; every alias in --json)"
                         if len(chains) > ALIAS_CHAINS else ""))
    if m.get("dummies"):
        console.print(f"dummy columns for error: {', '.join(m['dummies'])}")
    _print_runs(d.table, output)


#: Words of the defining relation printed on the terminal (the JSON holds every one).
DEF_WORDS = 30
#: Alias chains printed on the terminal.
ALIAS_CHAINS = 12

#: Rows of the run table shown on the terminal when a file holds all of it (rendering a
#: 100,000-row table took 272 s); columns as many as fit the terminal, at most HEAD_COLS.
HEAD_ROWS, HEAD_COLS = 10, 12
#: Without -o the whole table is printed up to this many runs.
FULL_ROWS = 1000


def _print_runs(table: pd.DataFrame, output: Path | None) -> None:
    """The run table, or its first rows and columns and where the rest is."""
    n, k = table.shape
    if output is None and n <= FULL_ROWS:
        for t in fitted_tables(table, console.width, title=f"{n} runs"):
            console.print(t)
        return
    rows = table.iloc[:HEAD_ROWS]
    used, cols = 4, 0  # a rich table's borders
    for c in table.columns[:HEAD_COLS]:
        width = max([len(str(c))] + [len(str(v)) for v in rows[c]]) + 3
        if cols >= 3 and used + width > console.width:
            break
        used, cols = used + width, cols + 1
    head = rows.iloc[:, :cols]
    more = [f"{n - len(head)} more runs"] if n > len(head) else []
    if k > cols:
        rest = [str(c) for c in table.columns[cols:]]
        more.append(f"{k - cols} more columns: {', '.join(rest[:4])}"
                    + (", ..." if len(rest) > 4 else ""))
    console.print(frame_table(head, title=f"first {len(head)} of {n} runs"
                              + (f" ({'; '.join(more)})" if more else "")))
    if output is not None:
        console.print(f"wrote {output}: {n} runs x {k} columns")
    else:
        console.print(f"{n} runs: write them all with -o FILE.csv (or --json)")


def _follow_up_space(path: Path, space_file: Path | None, factors: int | None, top: int,
                     response: str | None) -> tuple[Any, Any, str, str | None]:
    """The follow-up's space from a screening: a campaign file (its results and space) or a
    results table with the space file."""
    from ..analysis import follow_up
    from ..space import Space

    if factors is not None:
        raise StorlabError("--follow-up takes its factors from the screening, not --factors")
    if path.suffix in (".yaml", ".yml"):
        from ..campaign import Campaign

        if space_file is not None:
            raise StorlabError("--follow-up CAMPAIGN.yaml brings its own space; drop the "
                               "space file")
        camp = Campaign.load(path)
        # Every run, as `analyze` reads a campaign: configuration means would drop the
        # replicates and test the effects against the left-out interactions alone.
        space, table = camp.space, camp.results("run")
    else:
        if space_file is None:
            raise StorlabError(f"--follow-up {path}: a results table needs the screening's "
                               "space file: storlab design SPACE.yaml --follow-up RESULTS")
        space, table = Space.from_yaml(space_file), read_table(path)
    if response is None:
        if not space.responses:
            raise StorlabError("--follow-up needs --response: the space names no response")
        response = space.responses[0].name
    sub, ranking, inter = follow_up(table, space, response, top)
    return sub, ranking, response, inter


def analyze_cmd(
    results: Path = typer.Argument(..., help="Results table (CSV, Parquet, JSON) or a "
                                             "campaign file (its runs and its space).",
                                   callback=input_file("results")),
    response: str = typer.Option(..., "--response", "-y", help="Response column."),
    space_file: Optional[Path] = typer.Option(None, "--space", help="Space YAML (coding, goal) "
                                                                    "of a results table.",
                                              callback=input_file("--space")),
    factors: Optional[str] = typer.Option(None, "--factors", help="Factor columns a,b,c."),
    goal: Optional[str] = typer.Option(None, "--goal", help="maximize or minimize."),
    order: int = typer.Option(2, "--order", help="Highest interaction order to estimate.",
                              callback=at_least("--order", 1)),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level.",
                                callback=fraction("--alpha")),
    transform: str = typer.Option("none", "--transform",
                                  help="Analyse transform(response): none, log, log10, sqrt "
                                       "(log for throughput/latency spanning decades)."),
    plots: Optional[Path] = typer.Option(None, "--plots", help="Directory for PNG/SVG plots.",
                                         callback=output_dir("--plots")),
    plot_format: str = typer.Option("png", "--plot-format", help="png or svg."),
    json_out: bool = typer.Option(False, "--json/--no-json", help="Print JSON."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write JSON here.",
                                          callback=output_file("-o")),
) -> None:
    """Effects, ANOVA, Lenth's PSE, curvature and recommended settings for one response."""
    from ..analysis import analyze as analyze_effects
    from ..campaign.runners import is_metric
    from ._common import results_source

    table, space = results_source(results, space_file)
    if goal is not None and goal not in ("maximize", "minimize"):
        raise AnalysisError(f"--goal {goal!r} must be maximize or minimize")
    fac = [f.strip() for f in factors.split(",")] if factors else None
    try:
        a = analyze_effects(table, response, space=space, factors=fac, goal=goal, alpha=alpha,
                            max_order=order, transform=transform, is_metric=is_metric)
    except NotTwoLevel as exc:
        # a tuning or a sampled design: point to the analysis that reads any runs
        what = _sampled_kind(results)
        raise AnalysisError(
            (f"{results}: {what}'s runs are not a two-level design" if what else str(exc))
            + f"; `storlab importance {results} -y {response}` ranks the factors of any "
            "runs") from None
    if plots is not None:
        if plot_format not in ("png", "svg"):
            raise AnalysisError(f"--plot-format {plot_format!r} must be png or svg")
        make_output_dir(plots, "--plots")  # as root: no other user's link on the way
        skipped = _no_interactions(a)
        for kind in PLOT_KINDS:
            if kind == "interaction" and skipped:
                continue
            save_figure(a.plot(kind), plots / f"{response}-{kind}.{plot_format}", dpi=110)
    if json_out or output is not None:
        emit_json(a.to_dict(), output)
        if not json_out:
            console.print(f"wrote {output}")
        return
    console.print(f"[bold]{escape(str(a.label))}[/] ({a.goal}), {len(a.data)} runs, "
                  f"mean {a.data['_y'].mean():.4g}", markup=True)
    console.print(frame_table(a.effects[a.shown_columns], title="Effects (largest first)"))
    console.print(frame_table(a.anova, title="ANOVA"))
    if a.lenth is not None:
        console.print(f"Lenth: PSE {a.lenth.pse:.4g}, ME {a.lenth.me:.4g}, "
                      f"SME {a.lenth.sme:.4g} (df {a.lenth.df:.3g})")
    if a.curvature is not None:
        c = a.curvature
        at = (f" (the {c['n_factorial']} factorial runs at the center runs' "
              f"{'; '.join(c['matched_levels'])})" if "n_factorial" in c
              and c.get("matched_levels") else "")
        console.print(f"curvature: center mean {c['center_mean']:.4g} vs factorial mean "
                      f"{c['factorial_mean']:.4g}{at}, p = {c['p']:.3g}")
    for w in a.warnings:
        console.print(f"[yellow]note:[/] {escape(str(w))}", markup=True)
    r = a.recommendation
    if r.get("directions"):
        import pandas as pd

        console.print(frame_table(pd.DataFrame(r["directions"]).rename(columns={
            "direction": "level direction", "value": "optimised value"}),
            title=f"Level directions ({r['goal']}; +1 = high level, -1 = low level)"))
    if r["settings"]:
        sets = ", ".join(f"{s['factor']}={s['value']}" for s in r["settings"])
        console.print(f"[bold green]recommendation[/] ({r['goal']}): {escape(sets)}; "
                      f"predicted {escape(str(response))} = {r['predicted']:.4g}", markup=True)
    else:
        console.print("no significant effect: no setting to recommend")
    if plots is not None:
        console.print(f"plots in {plots}/" + (f" (no interaction plot: {skipped})"
                                               if skipped else ""))


def _sampled_kind(path: Path) -> str:
    """"a tuning campaign" / "an lhs campaign" when `path` is a campaign file whose design
    is not two-level, else ""."""
    if path.suffix.lower() not in (".yaml", ".yml"):
        return ""
    from ..campaign import load_spec

    try:
        kind = load_spec(path).design.kind
    except StorlabError:
        return ""
    if kind == "tune":
        return "a tuning campaign"
    return "an LHS campaign" if kind == "lhs" else ""


def _no_interactions(a: object) -> str:
    """Why an analysis has no two-factor interaction to plot, or "" when it has one."""
    eff = a.effects  # type: ignore[attr-defined]
    if (eff["order"] == 2).any():
        return ""
    if any("main effects only" in w for w in a.warnings):  # type: ignore[attr-defined]
        return ("the design estimates main effects only (its two-factor interactions are "
                "partially aliased with main effects, as in Plackett-Burman designs)")
    return "no two-factor interaction was estimated (--order 1, or too few runs)"


def register(app: typer.Typer) -> None:
    app.command("design")(design_cmd)
    app.command("analyze")(analyze_cmd)
