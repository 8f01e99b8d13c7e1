"""`storlab report` (the HTML campaign report) and `storlab coverage` (how much of the
observed behaviour space each benchmark covers)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import StorlabError
from ..fileio import make_output_dir, read_text, save_figure, write_frame
from ..limits import MAX_SEED
from ._common import (STORE_HELP, at_least, campaign_store_note, console, emit_json, escape,
                      fraction, frame_table, input_file, is_campaign, output_dir, output_file)

# matplotlib, scikit-learn and the report builder load inside the commands.


def _split(text: Optional[str]) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def report_cmd(
    source: Path = typer.Argument(..., help="Campaign YAML file, or a results CSV/Parquet.",
                                  callback=input_file("source")),
    output: Optional[Path] = typer.Option(None, "-o", "--output",
                                          help="HTML file to write (default: report.html "
                                               "next to the input).",
                                          callback=output_file("-o")),
    space_file: Optional[Path] = typer.Option(None, "--space",
                                              help="Space YAML (with a results table).",
                                              callback=input_file("--space")),
    response: list[str] = typer.Option([], "--response", "-y",
                                       help="Response to analyse (repeatable; default: the "
                                            "space's responses or the headline metrics)."),
    level: str = typer.Option("config", "--level",
                              help="Campaigns: analyse per-configuration means (config) or "
                                   "every run (run)."),
    coverage_by: Optional[str] = typer.Option(None, "--coverage-by",
                                              help="Add a coverage section grouping runs by "
                                                   "this column."),
    metrics: Optional[str] = typer.Option(None, "--metrics",
                                          help="Coverage metrics m1,m2,... (default: all)."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level.",
                                callback=fraction("--alpha")),
    transform: str = typer.Option("none", "--transform",
                                  help="Effects of transform(response): none, log, log10, "
                                       "sqrt (as storlab analyze --transform)."),
    json_out: bool = typer.Option(False, "--json/--no-json", help="Print what was written as JSON."),
    store: Optional[str] = typer.Option(None, "--store", help="Campaigns: " + STORE_HELP),
) -> None:
    """Write one self-contained HTML report of a campaign or a results table.

    Space, design, progress and failures, results, effects with Lenth's margins, ANOVA,
    Carver importance, recommendation and, when the data allow, the read/write-mix model.
    """
    from ..report import build_report, from_campaign, from_results

    if not source.exists():
        raise StorlabError(f"{source}: file not found")
    if level not in ("config", "run"):
        raise StorlabError(f"--level {level!r} must be config or run")
    if source.suffix.lower() in (".yaml", ".yml") and is_campaign(source):
        if space_file is not None:
            raise StorlabError("--space is for a results table; a campaign has its own space")
        inp = from_campaign(source, level, store)
        if not json_out:
            from ..campaign import Campaign

            campaign_store_note(Campaign.load(source, store))
    elif store is not None:
        raise StorlabError("--store is for a campaign file; a results table is its own data")
    elif source.suffix.lower() in (".yaml", ".yml"):
        raise StorlabError(f"{source}: not a campaign file (no runner or design); give a "
                           "results table and --space SPACE.yaml")
    else:
        from ..space import Space
        from ..fileio import read_table

        space = Space.from_yaml(space_file) if space_file else None
        inp = from_results(read_table(source), space, source=str(source),
                           responses=response or None)
    from ._progress import task_progress

    with task_progress("report", quiet=json_out) as step:
        rep = build_report(inp, responses=response or None, coverage_by=coverage_by,
                           coverage_metrics=_split(metrics), alpha=alpha, transform=transform,
                           progress=step)
    out = output if output is not None else source.parent / "report.html"
    rep.write(out)
    info = {"output": str(out), "bytes": out.stat().st_size,
            "sections": [s.id for s in rep.sections],
            "responses": list(rep.data["responses"])}
    if json_out:
        emit_json(info)
        return
    console.print(f"wrote {out} ({info['bytes'] / 1e6:.2f} MB): "
                  + ", ".join(s.title for s in rep.sections if s.nav))


def coverage_cmd(
    results: Path = typer.Argument(..., help="Results table (CSV or Parquet), one row per run.",
                                   callback=input_file("results")),
    by: str = typer.Option(..., "--by", help="Column naming each run's benchmark or workload."),
    metrics: Optional[str] = typer.Option(None, "--metrics",
                                          help="Metric columns m1,m2,... (default: every "
                                               "varying float column)."),
    components: Optional[int] = typer.Option(None, "--components",
                                             help="Independent components (default: enough "
                                                  "for 95 % of the variance).",
                                             callback=at_least("--components", 1)),
    clusters: Optional[int] = typer.Option(None, "--clusters",
                                           help="k-means clusters (default: best silhouette).",
                                           callback=at_least("--clusters", 2)),
    log: bool = typer.Option(False, "--log/--no-log", help="Take logs of the metrics first."),
    seed: int = typer.Option(0, "--seed", help="Seed of FastICA and k-means.",
                             callback=at_least("--seed", 0, MAX_SEED)),
    plots: Optional[Path] = typer.Option(None, "--plots", help="Directory for PNG plots.",
                                         callback=output_dir("--plots")),
    json_out: bool = typer.Option(False, "--json/--no-json", help="Print JSON."),
    output: Optional[Path] = typer.Option(None, "-o", "--output",
                                          help="Write .html (report), .json or .csv (table).",
                                          callback=output_file("-o")),
) -> None:
    """Which benchmark covers more of the observed behaviour: ICA + k-means + Ward."""
    from ..analysis import CoverageResult
    from ..analysis import coverage_of as coverage
    from ..fileio import read_table

    if output is not None and output.suffix.lower() not in (".html", ".json", ".csv"):
        raise StorlabError(f"-o {output}: use a .html, .json or .csv file")
    table = read_table(results)
    cov = coverage(table, by, metrics=_split(metrics), n_components=components,
                   n_clusters=clusters, log=log, seed=seed, source=str(results))
    if plots is not None:
        make_output_dir(plots, "--plots")  # as root: no other user's link on the way
        for kind in CoverageResult.PLOT_KINDS:
            save_figure(cov.plot(kind), plots / f"coverage-{kind}.png", dpi=150,
                        bbox_inches="tight")
    if output is not None:
        suffix = output.suffix.lower()
        if suffix == ".html":
            from ..report import coverage_report

            coverage_report(cov, str(results)).write(output)
        elif suffix == ".json":
            emit_json(cov.to_dict(), output)
        else:
            write_frame(cov.table(), output)
    if json_out:
        emit_json(cov.to_dict())
        return
    console.print(f"{len(cov.labels)} runs, {len(cov.metrics)} metrics, "
                  f"{cov.scores.shape[1]} independent components, {cov.k} clusters "
                  f"(Ward vs k-means ARI {cov.agreement:.2f})")
    console.print(frame_table(cov.table(), title=f"Coverage by {by}"))
    for d in cov.dropped:
        console.print(f"[yellow]left out:[/] {escape(str(d))}", markup=True)
    tied = cov.tied_with_best()
    if tied:  # equal on clusters, spread, range and runs: say so rather than pick silently
        console.print(f"[bold]{escape(str(cov.best()))}[/] and {escape(', '.join(tied))} tie on "
                      "clusters, spread, range and runs (listed by name)", markup=True)
    else:
        console.print(f"[bold green]{escape(str(cov.best()))}[/] covers the most clusters",
                      markup=True)
    if output is not None:
        console.print(f"wrote {output}")
    if plots is not None:
        console.print(f"plots in {plots}/")


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)
    app.command("coverage")(coverage_cmd)
