"""The report's sections: each analysis (design, effects, importance, tuning, progress
timeline, read/write-mix model, coverage) turned into a `Section` of HTML. A builder returns
None when it has nothing to show: a section without data is left out, never shown empty."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ReportError, StorlabError
from ..fileio import BOOKKEEPING
from . import html as H
from .inputs import ReportInput
from .inputs import response_goal as _goal
from .inputs import response_unit as _unit

ALL_GROUPS = "(all)"  # the coverage table's row for every run together
DESIGN_COLUMNS = ("std_order", "replicate", "block", "center")
PRIVATE = ("_n_ok", "_n_failed")
STATUS_COLORS = {"ok": "#009E73", "failed": "#D55E00", "timeout": "#CC79A7",
                 "running": "#E69F00", "pending": "#BBBBBB"}


def _m(name: str) -> Any:
    """A macro of `templates/sections.html.j2` (one per section, and their parts)."""
    return H.macro(name, "sections.html.j2")


@dataclass
class Section:
    """One part of the page: its anchor id, its table-of-contents title and its HTML."""

    id: str
    title: str
    html: str
    nav: bool = True


# --------------------------------------------------------------------------- sections
def overview_section(inp: ReportInput, resp: list[str]) -> Section:
    cards = []
    if inp.runs is not None:
        st = inp.runs["status"].value_counts()
        ok, bad = int(st.get("ok", 0)), int(st.get("failed", 0) + st.get("timeout", 0))
        cards += [(len(inp.runs), "runs planned", ""), (ok, "runs ok", "ok"),
                  (bad, "runs failed", "bad" if bad else "")]
        pend = int(st.get("pending", 0) + st.get("running", 0))
        if pend:
            cards.append((pend, "runs not finished", ""))
    cards.append((len(inp.results), "configurations" if inp.level == "config" else "rows", ""))
    if inp.space is not None:
        cards.append((inp.space.k, "factors", ""))
    cards.append((len(resp), "responses analysed", ""))
    facts: list[tuple[str, Any]] = [("source", inp.source)]
    if inp.runner:
        opts = ", ".join(f"{k}={_short(v)}" for k, v in inp.runner_options.items())
        facts.append(("runner", f"{inp.runner}" + (f" ({opts})" if opts else "")))
    if inp.repetitions:
        facts.append(("repetitions", inp.repetitions))
    for i, line in enumerate(inp.sandbox):
        facts.append(("sandbox" if i == 0 else "outside the sandbox", line))
    facts.append(("analysed table", inp.analysed or (
        "per-configuration means of the successful repetitions" if inp.level == "config"
        else "one row per run")))
    if resp:
        facts.append(("responses", ", ".join(resp)))
    return Section("overview", "Overview", _m("overview")(H.macro("cards")(cards),
                                                          H.dl_html(facts)))


def _txt(v: Any) -> str:
    """A factor value as the user wrote it (4096, not 4096.0)."""
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def _short(v: Any, width: int = 60) -> str:
    text = str(v)
    return text if len(text) <= width else text[:width - 1] + "…"


def space_section(inp: ReportInput) -> Section | None:
    sp = inp.space
    if sp is None:
        return None
    rows = []
    for lab, f in zip(sp.labels, sp.factors):
        vals = ", ".join(map(_txt, f.values)) if f.values is not None else (
            f"{_txt(f.range[0])} … {_txt(f.range[1])}" if f.range else "")
        rows.append({"label": lab, "factor": f.name, "kind": f.kind + (" (log)" if f.log else ""),
                     "low": _txt(f.low), "high": _txt(f.high),
                     "center": "" if f.center is None else _txt(f.center),
                     "values / range": vals, "unit": f.unit})
    t = pd.DataFrame(rows)
    t = t.loc[:, [c for c in t.columns if c not in ("center", "unit") or t[c].astype(bool).any()]]
    responses = [f"{r.name} ({r.unit}, {r.goal})" if r.unit else f"{r.name} ({r.goal})"
                 for r in sp.responses]
    return Section("space", "Space", _m("space")(H.table_html(t, sortable=False),
                                                 [c.text for c in sp.constraints], responses))


def design_section(inp: ReportInput) -> Section | None:
    m = inp.design_meta
    if not m:
        return None
    facts: list[tuple[str, Any]] = [("kind", m.get("kind", "")
                                     + (f" ({m['construction']})" if m.get("construction")
                                        else ""))]
    runs = m.get("runs")
    if inp.runs is not None and "config_id" in inp.runs:
        facts.append(("configurations", int(inp.runs["config_id"].nunique())))
    elif runs is not None:
        facts.append(("runs in the table", runs))
    if m.get("configurations"):
        facts.append(("distinct configurations", m["configurations"]))
    if inp.repetitions:
        facts.append(("repetitions per configuration", inp.repetitions))
    if m.get("resolution"):
        facts.append(("resolution", m.get("resolution_roman") or _roman(m["resolution"])))
    if m.get("generators"):
        facts.append(("generators", ", ".join(m["generators"])))
    if m.get("defining_relation"):
        facts.append(("defining relation", "I = " + " = ".join(m["defining_relation"])))
    if m.get("wlp") and any(m["wlp"]):
        facts.append(("word-length pattern (A1, A2, …)", ", ".join(map(str, m["wlp"]))))
    if "clear_2fi" in m and m.get("defining_relation"):
        facts.append(("clear two-factor interactions", m["clear_2fi"]))
    if m.get("center_points"):
        facts.append(("center points", m["center_points"]))
    if "main_orthogonal" in m:
        facts.append(("main effects", "orthogonal to each other" if m["main_orthogonal"]
                      else "correlated with each other"))
        facts.append(("largest |correlation| of a 2FI with a main effect",
                      m["max_main_2fi_corr"]))
    if m.get("dummies"):
        facts.append(("dummy columns (error estimate)", ", ".join(m["dummies"])))
    chains, more, letters = None, 0, []
    aliases = m.get("aliases") or {}
    if aliases and inp.space is not None:
        legend = {lab: n for lab, n in zip(inp.space.labels, inp.space.names)}
        from ..design.aliasing import alias_chains

        ordered = alias_chains(aliases)  # each chain once (AB = CE = DF), main effects first
        rows = [{"alias chain (to 2FIs)": " = ".join(c),
                 "meaning": " = ".join(_spell(w, legend) for w in c)} for c in ordered[:60]]
        chains = H.table_html(pd.DataFrame(rows), sortable=False)
        more, letters = max(len(ordered) - 60, 0), list(legend.items())
    pb = m.get("kind") == "pb" or "main_orthogonal" in m  # non-regular: no alias table
    return Section("design", "Design", _m("design")(H.dl_html(facts), inp.design_origin,
                                                    chains, more, letters, pb))


def _spell(word: str, legend: dict[str, str]) -> str:
    parts = word.split(":") if ":" in word else list(word)
    return " × ".join(legend.get(p, p) for p in parts)


def _roman(n: int) -> str:
    from ..design.aliasing import roman

    return roman(n)


def tuning_section(inp: ReportInput, data: dict[str, Any]) -> Section | None:
    """Best-so-far against runs with the phases, the confirmed configurations, the
    recommendation against the baseline (Welch), the Pareto front for two objectives."""
    from ..tune.result import change_text

    res = inp.tuning
    if res is None or not res.history:
        return None
    d = res.to_dict()
    data["tuning"] = {k: v for k, v in d.items() if k != "history"}
    name = d["response"]
    unit = _unit(inp, name)
    phases = ", ".join(f"{k} {v}" for k, v in d["phases"].items())
    facts_html = None
    b = d["best"]
    if b is not None:
        facts: list[tuple[str, Any]] = [
            ("recommended", ", ".join(f"{k}={v}" for k, v in b["config"].items())),
            (f"its {name}", _measured(b, unit))]
        from ..tune.result import race_lines

        facts += [("confirmation", line) for line in race_lines(d, unit)]
        for label, key, cmpkey in (("baseline", "baseline", "comparison"),
                                   ("best screened", "best_screened", "comparison_screened")):
            e, c = d.get(key), d.get(cmpkey)
            if e is None or (key == "best_screened" and c is None):
                continue
            kind = f" ({e['kind']})" if "kind" in e else ""
            facts.append((f"{label}{kind}", _measured(e, unit)))
            if c is not None and e["config"] != b["config"]:
                facts.append((f"recommended vs {label}",
                              f"{change_text(c['change'], c['difference'], unit)}, "
                              f"{c['verdict']}"))
            elif e["config"] == b["config"]:
                facts.append((f"recommended vs {label}", "the same configuration"))
        facts += [("note", n) for n in d["notes"]]
        facts_html = H.dl_html(facts)
    fig = H.figure_html(res.plot, "Tuning convergence",
                        "Each run's value by phase, the best single run so far, and the "
                        "confirmed means of the recommendation (with its interval) and of "
                        "the baseline"
                        + ("; right: the measured Pareto front" if d["pareto"] else ""))
    t = res.table()
    table = H.table_html(t, caption="Confirmed configurations, best first",
                         sortable=False) if len(t) else None
    return Section("tuning", "Tuning", _m("tuning")(d["strategy"], d["runs"], d["budget"],
                                                    phases, facts_html, fig, table))


def _measured(e: dict[str, Any], unit: str) -> Any:
    """'<b>5.93 G</b>B/s ± <b>…</b> over 3 runs' for a tuning entry (value, std, runs);
    no spread for a single run (its std is null: the best screened is judged on its one
    screening run)."""
    std = e.get("std")
    spread = _qty(std, unit) if std is not None and math.isfinite(std) else None
    # beside the confirmation runs' mean, the mean of all runs, written as the value is
    # (4.34 MB/s, not 4,338,882)
    confirmed = e.get("value_from") == "confirmation runs"
    every = (e["runs_all"], _qty(e["value_all_runs"], unit)) if confirmed else None
    return _m("measured")(_qty(e["value"], unit), spread, e["runs"], every)


def progress_section(inp: ReportInput, data: dict[str, Any]) -> Section | None:
    runs = inp.runs
    if runs is None or runs.empty:
        return None
    counts = runs["status"].value_counts()
    order = [s for s in ("ok", "failed", "timeout", "running", "pending") if s in counts]
    order += [s for s in counts.index if s not in order]
    total = int(counts.sum())
    data["progress"] = {s: int(counts[s]) for s in order}
    bar = H.macro("status_bar")([(s, f"{100 * counts[s] / total:.3f}",
                                      STATUS_COLORS.get(s, "#888"), int(counts[s]))
                                    for s in order])
    done = int(counts.get("ok", 0) + counts.get("failed", 0) + counts.get("timeout", 0))
    fig = failed = None
    t = runs.dropna(subset=["started", "ended"]) if {"started", "ended"} <= set(runs) else None
    if t is not None and len(t) > 1:
        fig = H.figure_html(lambda: progress_plot(t), "Cumulative finished runs over the "
                            "campaign's wall-clock time, failures marked",
                            "Finished runs over wall-clock time; crosses are failed runs. "
                            "A flat stretch is a slow or hung run.")
    bad = runs[runs["status"].isin(["failed", "timeout"])]
    if len(bad):
        from ..campaign.runners.base import failure_lines

        names = [n for n in inp.factors if n in bad.columns]
        rows = []
        for r in bad.head(50).to_dict("records"):
            tail = failure_lines(r.get("stderr") or r.get("stderr_tail") or "", 3)
            rows.append((r, "\n".join(tail)))
        cells = []
        for r, tail in rows:
            cfg = ", ".join(f"{n}={r[n]}" for n in names)
            code = r.get("exit_code")
            code = "" if code is None or (isinstance(code, float) and math.isnan(code)) \
                else str(int(code))
            cells.append((r.get("key", ""), r["status"], code, cfg, tail))
        failed = H.macro("failed_runs")(cells)
        data["failures"] = [{"key": r.get("key"), "status": r["status"]}
                            for r, _ in rows]
    return Section("progress", "Progress", _m("progress")(
        done, total, f"{100 * done / total:.0f}", bar, fig, len(bad), failed,
        max(len(bad) - 50, 0)))


def progress_plot(runs: pd.DataFrame) -> Any:
    """Finished runs over wall-clock time, failures marked: a Figure from a run table with
    `started`, `ended` (epoch seconds) and `status` (e.g. `Campaign.results("run")`)."""
    from ..plotstyle import styled

    t = runs.dropna(subset=["started", "ended"])
    if t.empty:
        raise ReportError("no finished runs with start and end times to plot")
    with styled():
        return _timeline(t)


def _timeline(t: pd.DataFrame) -> Any:
    from matplotlib.ticker import MaxNLocator

    from ..plotstyle import subplots

    t = t.sort_values("ended")
    t0 = float(t["started"].min())
    x = t["ended"].to_numpy(dtype=float) - t0
    span = float(x.max()) if len(x) else 0.0
    scale, unit = (1.0, "s") if span < 180 else (60.0, "min") if span < 3 * 3600 else \
        (3600.0, "h")
    x = x / scale
    y = np.arange(1, len(t) + 1)
    fig, ax = subplots(figsize=(6.4, 2.6))  # a detached Figure: no pyplot state
    ax.step(x, y, where="post", color="#0072B2")
    failed = t["status"].isin(["failed", "timeout"]).to_numpy()
    if failed.any():
        ax.scatter(x[failed], y[failed], marker="x", color="#D55E00", zorder=3,
                   label="failed")
        ax.legend(loc="lower right")
    ax.set_xlabel(f"wall-clock time since the first run ({unit})")
    ax.set_ylabel("finished runs (count)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # a count: no 2.5 runs
    ax.set_title("Progress")
    return fig


def results_section(inp: ReportInput, resp: list[str]) -> Section | None:
    df = inp.results
    if df.empty:
        return None
    factors = inp.factors
    metrics = [c for c in df.columns if c not in factors and c not in DESIGN_COLUMNS
               and c not in PRIVATE and c not in BOOKKEEPING
               and pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])]
    lead = [c for c in ("config_id",) if c in df.columns]
    counts = [c for c in PRIVATE if c in df.columns]
    shown = df.assign(**{f: df[f].map(_txt) for f in factors
                         if not pd.api.types.is_numeric_dtype(df[f])
                         or pd.api.types.is_bool_dtype(df[f])})
    # The responses first, after the configuration's id: with many factors the table is
    # wider than the page, and what was measured must not be the part scrolled out of view.
    main = shown[lead + [r for r in resp if r not in factors] + factors
                 + counts].rename(columns={"_n_ok": "ok runs", "_n_failed": "failed runs"})
    table = H.table_html(main, table_id="results-table", caption=(
        f"{len(df)} {'configurations' if inp.level == 'config' else 'runs'}; responses "
        + ", ".join(f"{r} ({_unit(inp, r)})" if _unit(inp, r) else r for r in resp)
        + (f", then the {len(factors)} factors" if factors else "")))
    others = [c for c in metrics if c not in resp]
    full = H.table_html(shown[lead + factors + list(metrics)]) if others else None
    return Section("results", "Results", _m("results")(table, full, len(metrics)))


def response_section(inp: ReportInput, response: str, alpha: float, transform: str = "none"
                      ) -> tuple[Section, dict[str, Any]]:
    from ..analysis.effects import analyze
    from ..analysis.importance import importance
    from ..analysis.plots import effects_plot
    from ..plotstyle import axis_label
    from ..campaign.runners import is_metric
    from ..errors import AnalysisError

    unit = _unit(inp, response)
    goal = _goal(inp, response)
    sid = "resp-" + "".join(ch if ch.isalnum() else "-" for ch in response)
    what = "configurations" if inp.level == "config" else "rows"
    # What the `response` macro of sections.html.j2 shows, part by part.
    r: dict[str, Any] = {"name": response, "label": axis_label(response, unit), "goal": goal,
                         "what": what, "notes": []}
    out: dict[str, Any] = {"unit": unit, "goal": goal}
    notes: list[str] = r["notes"]
    # A response some runs do not have (read latency of write-only runs): analysed on the
    # rows that have it, and only over the factors that still vary among them.
    df = inp.results
    have = pd.to_numeric(df[response], errors="coerce").notna()
    factors = list(inp.factors)
    out["rows_analysed"], out["rows_total"] = int(have.sum()), len(df)
    if not have.all():
        df = df[have]
        fixed = [f for f in factors if df[f].nunique(dropna=False) <= 1]
        factors = [f for f in factors if f not in fixed]
        why = (" (" + ", ".join(f"{f} = {_txt(df[f].iloc[0])}" for f in fixed) + " only)"
               if fixed and len(df) else "")
        r["partial"] = {"n": int(have.sum()), "total": len(have), "why": why,
                        "fixed": bool(fixed), "factors": factors}
        out["factors_analysed"] = factors
    a = None
    # Effects and ANOVA on every measured run, as `storlab analyze CAMPAIGN` does: the
    # repetitions of a configuration are the pure error. On configuration means the test
    # had 2 error df where the runs give 22, and the two disagreed on curvature.
    eff_df = df
    if inp.run_results is not None and inp.level == "config" and response in inp.run_results:
        runs = inp.run_results
        measured = int(pd.to_numeric(runs[response], errors="coerce").notna().sum())
        if measured > len(df):
            eff_df = runs  # analyze keeps the runs with a value and says how many
            r["runs_note"] = {"measured": measured, "configs": len(df)}
    if inp.space is not None and factors and len(eff_df) >= 2:
        try:
            a = analyze(eff_df, response, space=inp.space, factors=factors, goal=goal,
                        alpha=alpha, transform=transform)
        except AnalysisError as exc:
            notes.append(f"effects analysis not shown: {exc}")
    if a is not None:
        out["effects"] = a.to_dict()
        ln = a.lenth
        e: dict[str, Any] = {"alpha": f"{alpha:g}", "lenth": None if ln is None else {
            "pse": ln.pse, "me": ln.me, "sme": ln.sme, "df": f"{ln.df:.3g}"}}
        e["pareto"] = H.figure_html(lambda: effects_plot(a, "pareto", unit),
                                    f"Pareto chart of effects on {response}",
                                    "Absolute effects, largest on top; orange = significant "
                                    "(ANOVA p < α, or beyond Lenth's ME where the model has "
                                    "no error term).")
        e["halfnormal"] = H.figure_html(lambda: effects_plot(a, "halfnormal", unit),
                                        f"Half-normal plot of effects on {response}",
                                        "Inactive effects fall on the dashed null line "
                                        "through the origin; labelled points stand out of "
                                        "the noise.")
        e["table"] = _effects_table(a.effects[a.shown_columns], response)
        e["main"] = H.figure_html(lambda: effects_plot(a, "main", unit),
                                  f"Main-effect plots for {response}",
                                  ("Mean response" if a.balanced else
                                   "Least-squares (adjusted) mean response, the runs being "
                                   "unbalanced,")
                                  + " at each factor's low and high level; the dotted line "
                                  "is the grand mean. A steep line is a large effect.")
        if (a.effects["order"] == 2).any():
            e["interaction"] = H.figure_html(lambda: effects_plot(a, "interaction", unit),
                                             f"Interaction plots for {response}",
                                             "Non-parallel lines mean the effect of one "
                                             "factor depends on the level of the other.")
        e["anova"] = H.table_html(
            a.anova, table_id=f"anova-{sid}", caption=f"ANOVA of {response} " + (
                "(type I sums of squares; pct = share of the total sum of squares)"
                if a.ss_type == "I" else "(type II sums of squares, each term adjusted "
                "for the others: unbalanced runs; they overlap, so no shares)"))
        e["curvature"] = a.curvature
        r["effects"] = e
        notes += a.warnings
    imp = None
    names = factors or None
    # Importance on the same rows as the effects (every run, as `storlab importance
    # CAMPAIGN` reads them): it averages the repeats itself and keeps their spread as the
    # run-to-run noise, which configuration means had already thrown away.
    imp_df, imp_note = eff_df, ""
    if inp.tuning is not None:
        # Carver's method assumes a space-filling sample: only the screening runs are one
        # (the search holds factors still while it moves others; see tune.result).
        imp_df = inp.tuning.screening_table()
        if response in imp_df.columns:
            imp_df = imp_df[pd.to_numeric(imp_df[response], errors="coerce").notna()]
        imp_note = (f"importance from the {len(imp_df)} screening runs of a tuning campaign; "
                    "the search's runs are not a random sample")
    if (names is not None or inp.space is None) and len(imp_df) >= 2 \
            and response in imp_df.columns:
        try:
            imp = importance(imp_df, response, params=names, goal=goal,  # type: ignore[arg-type]
                             is_metric=is_metric)
            imp.source_note = imp_note
        except AnalysisError as exc:
            notes.append(f"Carver importance not shown: {exc}")
    elif imp_note:
        notes.append("Carver importance not shown: on a tuning campaign it uses only the "
                     f"screening runs, and {len(imp_df)} of them have {response}")
    if imp is not None and (imp.too_few or imp.steps):
        out["importance"] = imp.to_dict()
        i: dict[str, Any] = {"warnings": [n[:1].upper() + n[1:] for n in
                                          (imp.source_note, imp.cells_note) if n],
                             "too_few": imp.too_few}
        if imp.too_few:
            pt = imp.pi_table()
            pt["share"] = 100.0 * pt["share"]
            i["table"] = H.table_html(pt.rename(columns={"share": "share of variance (%)"})
                                      .drop(columns=["binned"]),
                                      table_id=f"pi-{sid}",
                                      caption="PI of each parameter on its own (eq. 2)")
        else:
            i.update(n_configs=imp.n_configs, noise_note=imp.noise_note,
                     aggregate=imp.aggregate, stop_reason=imp.stop_reason, mean=imp.mean,
                     rsd=f"{100 * imp.rsd:.3g}",
                     share=f"{100 * sum(s.share for s in imp.steps):.3g}")
            i["figure"] = H.figure_html(lambda: _styled_importance(imp, response, unit),
                                        f"Carver importance of parameters for {response}",
                                        "Left: each parameter's share of the variance on its "
                                        "own (PI). Right: mean and RSD of the runs left after "
                                        "fixing each selected parameter, in order, at its "
                                        "best value.")
            t = imp.table()
            t["subset_rsd"] = 100.0 * t["subset_rsd"]
            t["share"] = 100.0 * t["share"]
            # Importance averages the repeated runs first: its subsets count configurations.
            t = t.rename(columns={"subset_n": "configurations left", "subset_mean": "mean after",
                                  "subset_rsd": "RSD after (%)",
                                  "share": "share of variance (%)"})
            i["table"] = H.table_html(t.drop(columns=[c for c in ("binned",) if not
                                                      t[c].astype(bool).any()]),
                                      table_id=f"importance-{sid}",
                                      caption="Greedy path: after each step, the "
                                              "configurations with the best values so far")
        r["importance"] = i
    r["recommendation"] = _recommendation(a, imp if imp is not None and not imp.too_few
                                          else None, response, unit)
    if notes:
        out["notes"] = notes
    return Section(sid, response, _m("response")(r)), out


def _effects_table(eff: pd.DataFrame, response: str) -> Any:
    """The effects table, significant rows highlighted."""
    return H.table_html(eff, table_id=f"effects-{response}",
                        caption=f"Effects on {response}, largest first (pct = share of total "
                                "sum of squares)",
                        row_classes=["sig" if s else "" for s in eff["significant"]])


def _styled_importance(imp: Any, response: str, unit: str) -> Any:
    """The importance module's figure, with the response's unit on its value axis."""
    return imp.plot(unit=unit or None)


def _qty(v: float, unit: str) -> Any:
    """A quantity in prose: bytes with a prefix (5.93 GB/s), others as in the tables."""
    from ..plotstyle import eng

    if unit.startswith("B") and math.isfinite(v) and abs(v) >= 1e4:
        return _m("qty")(eng(v), unit, True)
    return _m("qty")(H.fmt_num(v), unit, False)


def _recommendation(a: Any, imp: Any, response: str, unit: str) -> Any:
    """The effects model's settings and the Carver path's, or None when neither exists."""
    eff = carver = None
    if a is not None:
        r = a.recommendation
        eff = {"settings": [(s["factor"], s["value"]) for s in r["settings"]],
               "goal": r["goal"], "others": r["others"],
               "predicted": _qty(r["predicted"], unit) if r["settings"] else None}
    if imp is not None and imp.steps:
        last = imp.steps[-1]
        target = min((r.value for r in imp.stop if r.kind == "rsd"), default=None)
        loose = (target is not None and math.isfinite(last.subset_rsd)
                 and last.subset_rsd > target)
        carver = {"sets": list(imp.best_values().items()), "size": last.subset_size,
                  "mean": _qty(last.subset_mean, unit),
                  "rsd": (f" (RSD {100 * last.subset_rsd:.3g} %)"
                          if math.isfinite(last.subset_rsd) else ""),
                  "loose": loose, "target": f"{100 * target:g}" if loose else ""}
    if eff is None and carver is None:
        return None
    return _m("recommendation")(response, eff, carver)


# --------------------------------------------------------------------------- rw mix
FIO_READ_PCT = {"read": 100.0, "randread": 100.0, "write": 0.0, "randwrite": 0.0}


def _rw_table(inp: ReportInput) -> tuple[pd.DataFrame, str, str] | None:
    """The results with a read-percentage and an I/O-size column, when the data has them
    (a `rwmixread`-like column, or fio's `rw` as pure reads/writes), else None."""
    from ..estimate.tables import READ_PCT_NAMES, SIZE_NAMES

    df = inp.results.copy()
    lower = {str(c).lower(): c for c in df.columns}
    pct = next((lower[n] for n in READ_PCT_NAMES if n in lower), None)
    rw = next((lower[n] for n in ("rw", "readwrite") if n in lower), None)
    if rw is not None and set(df[rw].astype(str)) <= set(FIO_READ_PCT):
        df["read_pct"] = df[rw].astype(str).map(FIO_READ_PCT)
        pct = "read_pct"
    if pct is None:
        return None
    size = next((lower[n] for n in SIZE_NAMES if n in lower), None)
    if size is None:
        opt = inp.runner_options.get("bs") or inp.runner_options.get("blocksize")
        if opt is None and inp.runner == "fio":
            opt = "4k"  # fio's default block size
        if opt is None:
            return None
        df["bs"] = str(opt)
        size = "bs"
    return df, pct, size


def _rw_plot(m: Any, label: str) -> Any:
    """The f_rw model's figure, titled with the configuration it is of."""
    fig = m.plot()
    fig.axes[0].set_title(f"f_rw model: {label}")
    return fig


def rwmix_section(inp: ReportInput, data: dict[str, Any]) -> Section | None:
    from ..estimate import fit_table

    got = _rw_table(inp)
    if got is None:
        return None
    df, pct, size = got
    if df[pct].nunique() < 2:
        return None
    skip = {pct, size, "rw", "readwrite"}
    others = [f for f in inp.factors if f not in skip and df[f].nunique() > 1]
    groups = list(df.groupby(others, sort=True)) if others else [((), df)]
    if len(groups) > 8:
        return None
    tables, plots, models = [], [], {}
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{n}={v}" for n, v in zip(others, key)) or "all runs"
        try:
            m = fit_table(g, read_pct=pct, size=size, source=label)
        except StorlabError:
            continue
        if not any(sf.anchor(0.0) and sf.anchor(100.0) for sf in m.fits.values()):
            continue
        t = m.table()
        for n, v in zip(others, key):
            t.insert(0, n, v)
        tables.append(t)
        models[label] = m.to_dict()
        if len(plots) < 4:
            plots.append(H.figure_html(lambda m=m, label=label: _rw_plot(m, label),
                                       f"Read/write-mix model for {label}"))
    if not tables:
        return None
    data["rwmix"] = models
    t = pd.concat(tables, ignore_index=True)
    # Two measured mixes fix C and f_rw exactly (C_spread is 0 by construction): the
    # invariance the model rests on is untested there, not confirmed, as `estimate`'s
    # "model error: unknown" says.
    untested = t["mixes"] < 3
    t["C_spread"] = t["C_spread"].where(~untested)
    t["invariant"] = ["not tested (only the 100 % read and 100 % write anchors)" if u
                      else "yes" if v else "no" for u, v in zip(untested, t["invariant"])]
    cols = [c for c in t.columns if c not in ("C_lo", "C_hi", "f_rw_lo", "f_rw_hi",
                                                "C_cv", "invariant")] + ["invariant"]
    table = H.table_html(t[cols], table_id="rwmix-table",
                         caption="Per size: anchors (IO/s), f_rw, capacity C and how much "
                                 "C varies over the measured mixes")
    return Section("rwmix", "R/W mix", _m("rwmix")(others, table, plots, bool(untested.all())))


# --------------------------------------------------------------------------- coverage
def coverage_html(cov: Any, heading: str = "h2") -> Any:
    """The coverage result: conclusion, per-group table, plots (HTML, the `coverage`
    macro)."""
    t = cov.table()
    groups = t[t[cov.by] != ALL_GROUPS]
    top = int(groups["clusters"].max())
    tied = list(groups.loc[groups["clusters"] == top, cov.by])
    best = cov.best()
    equal = cov.tied_with_best()
    if equal:  # the name decided: not a finding
        verdict = {"kind": "tie", "names": [best, *equal], "top": top}
    elif len(tied) == 1:
        verdict = {"kind": "one", "best": best, "top": top,
                   "spread": float(groups.loc[groups[cov.by] == best, "spread"].iloc[0])}
    else:
        verdict = {"kind": "several", "names": tied, "best": best, "top": top}
    figures = [
        H.figure_html(lambda: cov.plot("coverage"), "Clusters reached per group",
                      "Clusters each group reaches, and how its runs fall into them."),
        H.figure_html(lambda: cov.plot("scatter"), "Runs on the independent components",
                      "Each point is a run; grey areas are the k-means clusters."),
        H.figure_html(lambda: cov.plot("dendrogram"), "Cluster dendrogram",
                      "Ward clustering of the runs on the components; the dashed line "
                      "cuts the tree into the k-means number of clusters.")]
    table = H.table_html(t, table_id="coverage-table",
                         caption="Per group: clusters reached, their share, spread (RMS "
                                 "distance from the group's centroid in component units) "
                                 "and range share (mean over components of range / overall "
                                 "range)")
    return _m("coverage")({
        "heading": heading, "by": cov.by, "n_runs": len(cov.labels), "metrics": cov.metrics,
        "log": cov.log, "components": cov.scores.shape[1], "k": cov.k,
        "silhouette": cov.k_scores.get(cov.k, math.nan), "agreement": cov.agreement,
        "verdict": verdict, "table": table, "figures": figures, "dropped": cov.dropped})


def coverage_section(df: pd.DataFrame, by: str, metrics: Sequence[str] | None,
                      data: dict[str, Any], exclude: Sequence[str] = ()) -> Section:
    from ..analysis.coverage import coverage

    cov = coverage(df, by, metrics=metrics, exclude=exclude)
    data["coverage"] = cov.to_dict()
    return Section("coverage", "Coverage", coverage_html(cov))
