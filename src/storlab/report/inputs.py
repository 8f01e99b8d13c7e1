"""What a report reads: a campaign (its store, space, design provenance and run statuses)
or a results table (CSV/Parquet) with or without its space, as one `ReportInput`; the design's
properties come from the store, or are read off the factor columns (`design_from_data`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ReportError
from ..space import Space

#: Metrics a report analyses when neither the user nor the space names responses, in order
#: of preference (fio, sysbench, postmark and the simulator write these).
REPORT_RESPONSES = ("total_iops", "total_bw_bytes", "iops", "bw", "bw_bytes",
                    "transactions_per_s", "throughput", "read_clat_p99_us", "write_clat_p99_us")


# --------------------------------------------------------------------------- inputs
@dataclass
class ReportInput:
    """Everything a report can show, gathered from a campaign or from a results table."""

    title: str
    source: str
    results: pd.DataFrame
    space: Space | None = None
    design_meta: dict[str, Any] | None = None
    design_origin: str = ""            # "campaign design" or "read off the results table"
    runs: pd.DataFrame | None = None   # one row per planned measured run (campaigns)
    level: str = "config"
    repetitions: int | None = None
    runner: str = ""
    runner_options: dict[str, Any] = field(default_factory=dict)
    tuning: Any = None                 # storlab.tune.result.TuneResult (tuning campaigns)
    run_results: pd.DataFrame | None = None  # one row per measured run (campaigns)
    #: What one row of `results` is, as the overview says it ("": a campaign's, from
    #: `level`: per-configuration means, or one row per run).
    analysed: str = ""
    #: How the campaign's programs ran: the sandbox line and the steps declared
    #: `system_writable` (outside the sandbox), for the overview.
    sandbox: list[str] = field(default_factory=list)

    @property
    def factors(self) -> list[str]:
        if self.space is not None:
            return [n for n in self.space.names if n in self.results.columns]
        return []


def from_campaign(path: str | Path, level: str = "config", store: str | None = None
                  ) -> ReportInput:
    """Load a campaign file: its space, design provenance, run statuses and results (from
    `store` when given: `Campaign.load`)."""
    from ..campaign.campaign import Campaign

    camp = Campaign.load(path, store)
    spec = camp.spec
    meta, origin = None, ""
    tuning = None
    stored_meta = camp.design_meta()  # kept in the store; never made again here
    if camp.adaptive:
        if camp.store_path.exists():
            from ..tune.result import result_from_campaign

            tuning = result_from_campaign(camp)
        meta = {"kind": f"tune ({stored_meta.get('strategy')}, budget "
                        f"{stored_meta.get('budget')} runs)"}
        origin = "campaign design (adaptive: configurations proposed as results came in)"
    elif stored_meta.get("kind") not in (None, "csv", "configs"):
        meta, origin = stored_meta, "campaign design"
    stored = {r["key"]: r for r in camp.stored_runs()}
    run_results = None
    if camp.store_path.exists():
        results = camp.results(level)
        run_results = results if level == "run" else camp.results("run")
    else:
        results = pd.DataFrame(columns=["config_id", *camp.space.names])
    rows = []
    for r in camp.plan():
        s = stored.get(r.key, {})
        rows.append({"key": r.key, "seq": r.seq, "config_id": r.config_id,
                     "repetition": r.repetition, "status": s.get("status", "pending"),
                     "exit_code": s.get("exit_code"), "started": s.get("started"),
                     "ended": s.get("ended"), "host": s.get("host") or "",
                     "stderr": s.get("stderr_tail") or "", **r.config})
    if meta is None and len(results):
        meta, origin = design_from_data(results, camp.space), "read off the results table"
    return ReportInput(title=f"Campaign report: {camp.name}", source=str(camp.path),
                       results=results, space=camp.space, design_meta=meta,
                       design_origin=origin, runs=pd.DataFrame(rows), level=level,
                       repetitions=spec.repetitions, runner=spec.runner.type,
                       runner_options=dict(spec.runner.options), tuning=tuning,
                       run_results=run_results, sandbox=camp.sandbox_summary())


def from_results(results: pd.DataFrame, space: Space | None, source: str = "results",
                 title: str | None = None, responses: Sequence[str] | None = None
                 ) -> ReportInput:
    """A results table (and optionally its space) without a campaign: no progress section;
    the design is read off the table (its factors beside `responses`, the report's)."""
    if space is None:
        space = _space_from_table(results, responses)
    meta = design_from_data(results, space) if space is not None and len(results) else None
    runs = None
    if "status" in results.columns:  # a run-level export carries each run's status
        runs = results.assign(key=[f"row {i + 1}" for i in range(len(results))])
    level, analysed = table_level(results, space, meta)
    return ReportInput(title=title or f"Results report: {Path(source).name}", source=source,
                       results=results, space=space, design_meta=meta,
                       design_origin="read off the results table", runs=runs,
                       level=level, analysed=analysed)


def table_level(results: pd.DataFrame, space: Space | None,
                meta: dict[str, Any] | None) -> tuple[str, str]:
    """Whether a results table holds runs or configurations, and what its rows are: rows
    that repeat a configuration (fu.csv: 16 configurations x 2 runs) are runs, analysed
    as such (as `storlab analyze` does), never configuration means. `meta`:
    `design_from_data`'s, which has counted the configurations (None without rows)."""
    names = [n for n in space.names if n in results.columns] if space is not None else []
    n = len(results)
    # Without factor columns (or rows) each row is its own configuration.
    n_cfg = int(meta["configurations"]) if names and meta else n
    if "status" in results.columns or n_cfg < n:
        return "run", (f"one row per run ({n} runs of {n_cfg} configurations)"
                       if names else "one row per run")
    return "config", "one row per configuration, as the table gives it"


def _space_from_table(df: pd.DataFrame, responses: Sequence[str] | None = None
                      ) -> Space | None:
    """Two-level factor columns read off the data (as `storlab analyze` does without a
    space), beside the first of `responses` the table has, else of REPORT_RESPONSES (a user's own
    response `y` must not leave the report without factors: a results table of y alone)."""
    from ..analysis.effects import infer_codings
    from ..campaign.runners import is_metric
    from ..errors import AnalysisError
    from ..space import Factor

    resp = next((c for c in [*(responses or []), *REPORT_RESPONSES] if c in df.columns), None)
    if resp is None:
        return None
    try:
        codings = infer_codings(df, resp, is_metric=is_metric)
    except AnalysisError:
        return None
    facs = []
    for c in codings:
        # Sizes ("4k", "64k") are coded as numbers but written as text: such a factor is
        # kept with its values as the table writes them (float("4k") raised a traceback).
        if c.numeric and all(isinstance(v, (int, float, np.number)) for v in (c.low, c.high)):
            kind = "integer" if float(c.low).is_integer() and float(c.high).is_integer() \
                else "real"
            facs.append(Factor(c.name, kind, range=(c.low, c.high), low=c.low, high=c.high,
                               center=c.center))
        else:
            facs.append(Factor(c.name, "categorical", values=[c.low, c.high], low=c.low,
                               high=c.high))
    return Space(facs, name="factors read off the results") if facs else None


def design_from_data(results: pd.DataFrame, space: Space) -> dict[str, Any]:
    """Runs, configurations and, for two-level data, the defining relation, resolution,
    word-length pattern and aliases computed from the factor columns themselves."""
    from ..design.aliasing import alias_structure, clear_effects, resolution, word_name, \
        words_from_matrix, wlp

    names = [n for n in space.names if n in results.columns]
    meta: dict[str, Any] = {"kind": "unknown", "runs": len(results),
                            "configurations": int(len(results[names].astype(str)
                                                      .drop_duplicates())) if names else 0}
    if not names:
        return meta
    try:
        x = np.column_stack([space[n].to_coded(results[n]) for n in names])
    except (ValueError, TypeError):
        return meta
    center = np.all(np.abs(np.nan_to_num(x, nan=9)) < 1e-9, axis=1)
    xf = x[~center]
    if len(xf) and np.all(np.isfinite(xf)) and np.allclose(np.abs(xf), 1.0) \
            and len(names) <= 22:
        xs = np.sign(xf)
        k = len(names)
        words = words_from_matrix(xs)
        distinct = len({tuple(r) for r in xs})
        meta["center_points"] = int(center.sum())
        if distinct * (len(words) + 1) != 2 ** k:
            # Not a regular fraction (Plackett-Burman and the like): there is no defining
            # relation, and an interaction is partly correlated with several main effects.
            mains = xs - xs.mean(axis=0)
            cross = np.abs(np.corrcoef(mains, rowvar=False)[np.triu_indices(k, 1)]) \
                if k > 1 else np.zeros(1)
            twos = np.column_stack([xs[:, i] * xs[:, j] for i in range(k)
                                    for j in range(i + 1, k)]) if k > 1 else None
            r2 = 0.0
            if twos is not None:
                a = (mains / np.linalg.norm(mains, axis=0))
                b = twos - twos.mean(axis=0)
                nb = np.linalg.norm(b, axis=0)
                ok = nb > 0
                r2 = float(np.abs(a.T @ (b[:, ok] / nb[ok])).max()) if ok.any() else 1.0
            meta.update(kind="two-level, non-regular (no defining relation)",
                        main_orthogonal=bool(np.all(cross < 1e-9)),
                        max_main_2fi_corr=r2)
            return meta
        pat = wlp(words, k)
        labels = space.labels[:len(names)]
        meta.update(kind="two-level" + (" full factorial" if distinct == 2 ** len(names)
                                        else " fraction"),
                    resolution=resolution(pat), wlp=pat,
                    defining_relation=[word_name(w, labels) for w in words][:30],
                    aliases=alias_structure(words, len(names), labels),
                    clear_2fi=len(clear_effects(words, len(names))[1]),
                    center_points=int(center.sum()))
    return meta


def choose_responses(inp: ReportInput, given: Sequence[str] | None) -> list[str]:
    df = inp.results
    if given:
        bad = [r for r in given if r not in df.columns]
        if bad:
            raise ReportError(f"response column(s) {bad} not in the results (columns: "
                              f"{', '.join(map(str, df.columns))})")
        return list(given)
    if df.empty:
        return []
    usable = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])
              and df[c].notna().any() and df[c].nunique() > 1]
    if inp.space is not None and inp.space.responses:
        named = [r.name for r in inp.space.responses if r.name in usable]
        if named:
            return named
    return [c for c in REPORT_RESPONSES if c in usable][:2]


def response_unit(inp: ReportInput, name: str) -> str:
    from ..plotstyle import metric_unit

    u = ""
    if inp.space is not None:
        u = next((r.unit for r in inp.space.responses if r.name == name), "")
    return metric_unit(name, u)


def response_goal(inp: ReportInput, name: str) -> str:
    if inp.space is not None:
        for r in inp.space.responses:
            if r.name == name:
                return r.goal
    return "minimize" if "lat" in name or name.endswith("_us") else "maximize"
