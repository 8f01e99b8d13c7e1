"""The campaign report: one self-contained HTML file from a campaign (or a results table
plus its space).

The report only formats what the analyses return (`storlab.analysis.effects.analyze`,
`storlab.analysis.importance.importance`, `storlab.estimate`, `storlab.analysis.coverage`):
every number in it is the number `storlab analyze --json` prints for the same table, and the
same numbers are embedded as JSON (`<script id="storlab-data">`) for scripts. A section
without data is left out, never shown empty.

This module is the orchestrator: `report.inputs` gathers what to show (`from_campaign`,
`from_results`), `report.sections` turns each analysis into a `Section`, `report.html` and
the Jinja2 templates render the page.
"""

from __future__ import annotations

import datetime as _dt
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..jsonutil import to_jsonable
from . import html as H
from . import sections as S
from .inputs import (REPORT_RESPONSES, ReportInput, choose_responses, design_from_data,
                     from_campaign, from_results)
from .sections import ALL_GROUPS, Section, coverage_html, progress_plot

__all__ = ["ALL_GROUPS", "REPORT_RESPONSES", "Report", "ReportInput", "Section", "build_report",
           "coverage_html", "coverage_report", "design_from_data", "from_campaign",
           "from_results", "progress_plot"]


@dataclass
class Report:
    """A built report: its sections (only those with data), the numbers behind them."""

    title: str
    subtitle: str
    sections: list[Section]
    data: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def html(self) -> str:
        from .. import __version__ as version

        body = H.macro("body")(self.sections, to_jsonable(self.data))
        return H.page(self.title, self.subtitle, [(s.id, s.title) for s in self.sections
                                                  if s.nav], body, H.macro("footer")(version))

    def write(self, path: str | Path) -> Path:
        from ..fileio import write_text

        # temp file + rename: never a partial report. One that shows failed runs' last
        # lines is as private as the store: a run (root) may have printed a root-only file.
        return write_text(path, self.html(), private="failures" in self.data)


def build_report(inp: ReportInput, responses: Sequence[str] | None = None,
                 coverage_by: str | None = None, coverage_metrics: Sequence[str] | None = None,
                 alpha: float = 0.05, transform: str = "none",
                 progress: Callable[..., None] | None = None, figures: bool = True) -> Report:
    """Analyse every response (effects on `transform(response)`, see
    `storlab.analysis.effects.analyze`) and lay out the sections that have data.
    `progress(label, advance=..., total=...)` hears of each part as it is done.
    `figures=False` leaves the figures out: the same sections, tables and numbers in a
    fraction of the time (drawing is most of it)."""
    from ..plotstyle import styled

    df = inp.results
    resp = choose_responses(inp, responses)
    say = progress or (lambda *a, **k: None)
    say("overview", advance=0, total=len(resp) + 2 + bool(coverage_by))
    data: dict[str, Any] = {"title": inp.title, "source": inp.source, "level": inp.level,
                            "responses": {}}
    sections: list[Section] = []
    with warnings.catch_warnings(), styled(), H.figures(figures):
        warnings.simplefilter("ignore")  # numerical chatter of tiny designs; notes say more
        sections.append(S.overview_section(inp, resp))
        for s in (S.space_section(inp), S.design_section(inp), S.tuning_section(inp, data),
                  S.progress_section(inp, data), S.results_section(inp, resp)):
            if s is not None:
                sections.append(s)
        say("space, design, progress, results")
        for r in resp:
            sec, d = S.response_section(inp, r, alpha, transform)
            data["responses"][r] = d
            sections.append(sec)
            say(r)
        rw = S.rwmix_section(inp, data)
        if rw is not None:
            sections.append(rw)
        say("read/write-mix model")
        if coverage_by:
            sections.append(S.coverage_section(df, coverage_by, coverage_metrics, data,
                                               exclude=inp.factors))
            say("coverage")
    when = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    sub = f"{inp.source} · generated {when}"
    return Report(inp.title, sub, sections, data)


def coverage_report(cov: Any, source: str) -> Report:
    """A standalone coverage report (`storlab coverage ... -o coverage.html`)."""
    from ..plotstyle import styled

    with styled():
        body = coverage_html(cov)
    when = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    return Report(f"Benchmark coverage: {Path(source).name}", f"{source} · generated {when}",
                  [Section("coverage", "Coverage", body, nav=False)],
                  {"coverage": cov.to_dict()})
