"""`storlab run`, `storlab results`, `storlab status`: execute a campaign file, export its
results table, show its progress."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from ..fileio import write_frame
from ._common import console, emit_json, frame_table, output_file

# Headline metrics for the progress bar's "last result", first one present wins.
HEADLINE = ("total_iops", "iops", "transactions_per_s", "reads_per_s", "total_bw_bytes")


def _headline(metrics: dict[str, Any]) -> str:
    for k in (*HEADLINE, *sorted(metrics)):
        v = metrics.get(k)
        if isinstance(v, (int, float)) and math.isfinite(v):
            return f"{k}={v:.4g}"
    return ""


def run_cmd(
    campaign_file: Path = typer.Argument(..., help="Campaign YAML file."),
    executor: str = typer.Option("sequential", "--executor", "-e",
                                 help="sequential, parallel[:N], or dask://host:port."),
    retry_failed: bool = typer.Option(False, "--retry-failed",
                                      help="Run failed and timed-out runs again."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    output: Optional[Path] = typer.Option(None, "-o", "--output",
                                          help="Write the summary JSON to a file.",
                                          callback=output_file("-o")),
) -> None:
    """Run a campaign (resumes: finished runs are kept, unfinished ones run again)."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    from ..campaign.campaign import Campaign

    camp = Campaign.load(campaign_file)
    show = not (quiet or json_out) and sys.stderr.isatty()
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TextColumn("failed {task.fields[failed]}"),
                        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                        TextColumn("{task.fields[last]}"), disable=not show,
                        console=console if show else None, transient=False)
    state: dict[str, Any] = {"task": None, "failed": 0}

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "start":
            state["task"] = progress.add_task(camp.name, total=data["planned"],
                                              completed=data["done"], failed=0, last="")
            if not quiet and not json_out:
                print(f"{camp.name}: {data['planned']} runs planned, {data['done']} done, "
                      f"store {data['store']}", file=sys.stderr)
        elif kind == "run":
            res = data["result"]
            if data["warmup"]:
                progress.update(state["task"], last=f"warm-up {data['key']} {res.status}")
                return
            if not res.ok:
                state["failed"] += 1
            last = f"{data['key']} {res.status} " + (_headline(res.metrics) if res.ok else
                                                     res.stderr.strip()[-60:])
            progress.update(state["task"], advance=1, failed=state["failed"], last=last)
            if not show and not quiet and not json_out:
                print(f"  {last}", file=sys.stderr)
        elif kind == "stopping":
            print("\nstopping after the current run (Ctrl-C again to abort it)",
                  file=sys.stderr)

    with progress:
        summary = camp.run(executor=executor, retry_failed=retry_failed, on_event=on_event)
    data = {"campaign": str(camp.path), "store": str(camp.store_path),
            "planned": summary.planned, "already_done": summary.already_done,
            "ran": summary.ran, "ok": summary.ok, "failed": summary.failed,
            "failures": summary.failures, "interrupted": summary.interrupted}
    if json_out or output:
        emit_json(data, output)
    if not json_out:
        console.print(f"{camp.name}: ran {summary.ran} (ok {summary.ok}, failed "
                      f"{summary.failed}); store {camp.store_path}")
        if summary.failures:
            console.print(f"failed runs: {', '.join(summary.failures[:10])}"
                          + (" ..." if len(summary.failures) > 10 else "")
                          + "  (see `storlab status`; rerun with --retry-failed)")
    if summary.interrupted:
        console.print("interrupted: run the same command again to resume")
        raise typer.Exit(130)


def results_cmd(
    campaign_file: Path = typer.Argument(..., help="Campaign YAML file."),
    output: Optional[Path] = typer.Option(None, "-o", "--output",
                                          help="Write the table: .csv or .parquet (.json).",
                                          callback=output_file("-o")),
    level: str = typer.Option("config", "--level",
                              help="config (averages per configuration), run (one row "
                                   "per repetition) or host (per-host rows)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Export the campaign's tidy results table (the input of every analysis)."""
    from ..campaign.campaign import Campaign

    df = Campaign.load(campaign_file).results(level)
    if output is not None:
        write_frame(df, output)  # by suffix; a temp file renamed, never a partial export
        if not json_out:
            console.print(f"wrote {len(df)} rows to {output}")
    if json_out:
        emit_json(df)
    elif output is None:
        console.print(frame_table(_narrow(df), title=f"results ({level}); all columns with "
                                                      "-o FILE or --json"))


def _narrow(df: Any) -> Any:
    """Bookkeeping, factors and a few headline metrics: the full table is too wide to read."""
    keep = [c for c in df.columns if c in ("config_id", "repetition", "status", "host")]
    metrics = [c for c in df.columns if df[c].dtype.kind == "f" and c not in keep
               and not c.startswith("_") and c not in ("started", "ended")]
    first = [c for c in (*HEADLINE, "read_clat_p99_us", "write_clat_p99_us") if c in metrics]
    factors = [c for c in df.columns if c not in metrics and c not in keep
               and not str(c).startswith("_")
               and c not in ("std_order", "replicate", "block", "center", "exit_code",
                             "started", "ended")]
    return df[keep + factors + (first or metrics)[:3]]


def status_cmd(
    campaign_file: Path = typer.Argument(..., help="Campaign YAML file."),
    failures: bool = typer.Option(False, "--failures", help="Show failed runs' stderr tail."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write JSON to a file.",
                                          callback=output_file("-o")),
) -> None:
    """Runs per status, and the failed runs with the end of their stderr."""
    from ..campaign.campaign import Campaign
    from ..campaign.store import Store

    camp = Campaign.load(campaign_file)
    counts = camp.status()
    failed: list[dict[str, Any]] = []
    if camp.store_path.exists():
        with Store(camp.store_path) as store:
            failed = [{"key": r["key"], "status": r["status"], "exit_code": r["exit_code"],
                       "stderr": (r["stderr_tail"] or "").strip().splitlines()[-1:]}
                      for r in store.runs() if r["status"] in ("failed", "timeout")]
    if json_out or output:
        emit_json({"counts": counts, "failed": failed}, output)
        if json_out:
            return
    console.print(frame_table(counts, title=f"{camp.name}: runs"))
    if failures and failed:
        import pandas as pd

        console.print(frame_table(pd.DataFrame([{**f, "stderr": " ".join(f["stderr"])}
                                                for f in failed]), title="failed runs"))


def register(app: typer.Typer) -> None:
    app.command("run")(run_cmd)
    app.command("results")(results_cmd)
    app.command("status")(status_cmd)
