"""`storlab run`, `storlab results`, `storlab status`: execute a campaign file, export its
results table, show its progress."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from ..errors import StorlabError
from ..fileio import write_frame
from ._common import STORE_HELP, campaign_store_note, console, emit_json, frame_table, \
    output_dir, output_file
from ._progress import PROGRESS_METRICS

def run_cmd(
    campaign_file: Path = typer.Argument(..., help="Campaign YAML file."),
    executor: str = typer.Option("sequential", "--executor", "-e",
                                 help="sequential, parallel[:N], or dask://host:port."),
    retry_failed: bool = typer.Option(False, "--retry-failed/--no-retry-failed",
                                      help="Run failed and timed-out runs again."),
    quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", help="No progress bar."),
    json_out: bool = typer.Option(False, "--json/--no-json", help="Print the summary as JSON."),
    output: Optional[Path] = typer.Option(None, "-o", "--output",
                                          help="Write the summary JSON to a file.",
                                          callback=output_file("-o")),
    wait: bool = typer.Option(False, "--wait/--no-wait",
                              help="If another storlab runs this campaign, wait for it to "
                                   "finish instead of exiting (then run what is left)."),
    env_pass: list[str] = typer.Option([], "--env-pass", help="Let the campaign's programs "
                                       "have this variable of yours when its sandbox.env_pass "
                                       "names it (repeat; also STORLAB_ENV_PASS=A,B)."),
    fail_on_error: bool = typer.Option(False, "--fail-on-error/--no-fail-on-error",
                                       help="Exit 1 when any run of this invocation failed "
                                            "(default: only when every one did)."),
) -> None:
    """Run a campaign (resumes: finished runs are kept, unfinished ones run again).

    Exits 1 when this invocation ran runs and none succeeded (with --fail-on-error: when
    any failed), 2 on bad input, 130 when interrupted. One writer per campaign: while
    another `storlab run` holds the campaign, this one exits with status 2 naming it, or
    waits with --wait."""
    from ..campaign import Campaign, grant_env
    from ._progress import campaign_progress

    grant_env(env_pass)
    camp = Campaign.load(campaign_file)
    with campaign_progress(camp.name, quiet, json_out) as on_event:
        summary = camp.run(executor=executor, retry_failed=retry_failed, on_event=on_event,
                           wait=wait)
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
                          + "  (rerun them with --retry-failed)")
    if summary.interrupted:
        console.print("interrupted: run the same command again to resume")
        raise typer.Exit(130)
    code = failed_runs_exit(summary.ran, summary.ok, summary.failed, campaign_file,
                            fail_on_error, json_out)
    if code:
        raise typer.Exit(code)


def failed_runs_exit(ran: int, ok: int, failed: int, campaign_file: Path,
                     fail_on_error: bool, json_out: bool, why: str = "") -> int:
    """Say how many of this invocation's runs failed (last line; on stderr beside
    --json) and return the exit status: 1 when runs ran and none succeeded, or any failed
    with `fail_on_error`; else 0. Shared by the commands that run campaigns."""
    if not failed:
        return 0
    why = why or f"see why: storlab status {campaign_file} --failures"
    line = ((f"all {failed} runs failed" if failed > 1 else "the one run failed")
            if not ok and failed == ran else f"{failed} of {ran} runs failed") + f" ({why})"
    if json_out:
        typer.echo(f"storlab: {line}", err=True)
    else:
        console.print(line, highlight=False, soft_wrap=True)
    return 1 if fail_on_error or (ran and not ok) else 0


def results_cmd(
    campaign_file: Path = typer.Argument(..., help="Campaign YAML file."),
    output: Optional[Path] = typer.Option(None, "-o", "--output",
                                          help="Write the table: .csv or .parquet (.json).",
                                          callback=output_file("-o")),
    level: str = typer.Option("config", "--level",
                              help="config (averages per configuration), run (one row "
                                   "per repetition) or host (per-host rows)."),
    json_out: bool = typer.Option(False, "--json/--no-json", help="Print JSON."),
    fio_json: Optional[Path] = typer.Option(
        None, "--fio-json", help="Also write each fio run's own JSON output to this "
        "directory (c<config>-r<repetition>.json), for fio-plot and other fio tools.",
        callback=output_dir("--fio-json")),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """Export the campaign's tidy results table (the input of every analysis)."""
    from ..campaign import Campaign

    camp = Campaign.load(campaign_file, store)
    note = camp.source_store_note()
    if note is not None and not camp.store_path.exists():
        raise StorlabError(f"{camp.store_path}: no store yet; {note}")
    if note is not None and not json_out:
        campaign_store_note(camp)
    df = camp.results(level)
    if level == "host" and not len(df):
        # per-host rows come from runs that load from several hosts; a blank line said nothing
        raise StorlabError(f"{campaign_file}: no per-host rows: only multi-client runs (fio "
                           "client/server, objectstore or ceph from several hosts) record "
                           f"them, and this {camp.spec.runner.type} campaign's runs have none; "
                           "use --level run or --level config")
    if fio_json is not None:
        if camp.spec.runner.type != "fio":
            raise StorlabError(f"{camp.path}: --fio-json needs a fio campaign (runner "
                               f"{camp.spec.runner.type!r})")
        files = camp.export_documents(fio_json)
        if not json_out:
            console.print(f"wrote {len(files)} fio JSON files to {fio_json}/")
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
    """Bookkeeping, factors and a few headline metrics: the full table is too wide to read.
    A column empty on every row is left out (read latency of a write-only design, a metric
    no run produced): it would take a headline slot and show nothing."""
    df = df[[c for c in df.columns if not _empty(df[c])]]
    keep = [c for c in df.columns if c in ("config_id", "repetition", "status", "host")]
    metrics = [c for c in df.columns if df[c].dtype.kind == "f" and c not in keep
               and not c.startswith("_") and c not in ("started", "ended")]
    first = [c for c in (*PROGRESS_METRICS, "read_clat_p99_us", "write_clat_p99_us")
             if c in metrics]
    factors = [c for c in df.columns if c not in metrics and c not in keep
               and not str(c).startswith("_")
               and c not in ("std_order", "replicate", "block", "center", "exit_code",
                             "started", "ended")]
    return df[keep + factors + (first or metrics)[:3]]


def _empty(col: Any) -> bool:
    """True when no row has a value (NaN, None or an empty string everywhere)."""
    return bool(col.isna().all() or (col.astype(str).str.strip() == "").all())


def status_cmd(
    campaign_file: Path = typer.Argument(..., help="Campaign YAML file."),
    failures: bool = typer.Option(False, "--failures/--no-failures", help="Show failed runs' stderr tail."),
    json_out: bool = typer.Option(False, "--json/--no-json", help="Print JSON."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write JSON to a file.",
                                          callback=output_file("-o")),
    store: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """Runs per status, and the failed runs with the end of their stderr."""
    from ..campaign import FAILED, Campaign
    from ..campaign.runners import failure_lines

    camp = Campaign.load(campaign_file, store)
    counts = camp.status()
    failed = [{"key": r["key"], "status": r["status"], "exit_code": r["exit_code"],
               "stderr": failure_lines(r["stderr_tail"], 5 if failures else 2)}
              for r in camp.stored_runs(warmup=True) if r["status"] in FAILED]
    sandbox = camp.sandbox_summary()
    if json_out or output:
        emit_json({"counts": counts, "failed": failed, "sandbox": sandbox}, output)
        if json_out:
            return
    console.print(frame_table(counts, title=f"{camp.name}: runs"))
    campaign_store_note(camp)
    for i, line in enumerate(sandbox):
        console.print(("sandbox: " if i == 0 else "outside the sandbox (system_writable): ")
                      + line, highlight=False, markup=False, soft_wrap=True)
    if failed:
        import pandas as pd

        shown = failed if failures else failed[:5]
        console.print(frame_table(pd.DataFrame([{**f, "stderr": "\n".join(f["stderr"])}
                                                for f in shown]),
                                  title="failed runs: the end of their stderr"
                                        + ("" if failures or len(failed) <= 5 else
                                           f" (5 of {len(failed)}; --failures: all, with "
                                           "more lines)")))


def register(app: typer.Typer) -> None:
    app.command("run")(run_cmd)
    app.command("results")(results_cmd)
    app.command("status")(status_cmd)
