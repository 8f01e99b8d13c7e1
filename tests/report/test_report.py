"""The HTML report without a browser: its numbers are the analyses' numbers, sections
without data are left out, failures show with their stderr, bad input is one line."""

from __future__ import annotations

import json
import os
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from storlab.analysis.effects import analyze
from storlab.report import build_report, from_campaign, from_results
from storlab.report.html import fmt_num, table_html
from storlab.space import Space

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)


SPACE = {
    "name": "toy",
    "factors": [{"name": "threads", "kind": "integer", "values": [1, 8], "unit": "threads"},
                {"name": "sched", "kind": "categorical", "values": ["none", "mq-deadline"]},
                {"name": "bs", "kind": "ordinal", "values": ["4k", "64k"]}],
    "responses": [{"name": "iops", "unit": "IO/s", "goal": "maximize"}],
}


def toy_results(seed: int = 1) -> pd.DataFrame:
    """A replicated 2^3 with known effects: threads +4000, bs -2000, threads:bs -1000."""
    rng = np.random.default_rng(seed)
    rows = []
    for rep in range(2):
        for t in (1, 8):
            for s in ("none", "mq-deadline"):
                for b in ("4k", "64k"):
                    xt, xb = (1 if t == 8 else -1), (1 if b == "64k" else -1)
                    y = 10000 + 2000 * xt - 1000 * xb - 500 * xt * xb + rng.normal(0, 50)
                    rows.append({"threads": t, "sched": s, "bs": b, "iops": y,
                                 "lat_us": 1e6 / y + rng.normal(0, 1)})
    return pd.DataFrame(rows)


class Tables(HTMLParser):
    """Every table's cells: id -> list of rows of (text, data-v)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[tuple[str, str | None]]]] = {}
        self.sections: list[str] = []
        self.cur: str | None = None
        self.row: list[tuple[str, str | None]] | None = None
        self.cell: list[Any] | None = None
        self.imgs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section":
            self.sections.append(a.get("id") or "")
        elif tag == "table":
            self.cur = a.get("id") or f"t{len(self.tables)}"
            self.tables[self.cur] = []
        elif tag == "tr" and self.cur is not None:
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.cell = ["", a.get("data-v")]
        elif tag == "img":
            self.imgs.append(a.get("src") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None and self.row is not None:
            self.row.append((self.cell[0].strip(), self.cell[1]))
            self.cell = None
        elif tag == "tr" and self.row is not None and self.cur is not None:
            self.tables[self.cur].append(self.row)
            self.row = None
        elif tag == "table":
            self.cur = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell[0] += data


def parse(html: str) -> Tables:
    p = Tables()
    p.feed(html)
    return p


def records(rows: list[list[tuple[str, str | None]]]) -> list[dict[str, tuple[str, Any]]]:
    head = [t for t, _ in rows[0]]
    return [dict(zip(head, r)) for r in rows[1:]]


# --------------------------------------------------------------------------- helpers
def test_fmt_num() -> None:
    assert fmt_num(1234567.89) == "1,234,568"
    assert fmt_num(9.879e18) == "9.879E"  # an SI prefix, as 667.8P beside it (no e+18)
    assert fmt_num(2.5e30) == "2.5e+30"  # beyond yotta: an exponent
    assert fmt_num(501_312_345.0) == "501.3M" and fmt_num(-5.9316e9) == "-5.932G"
    assert fmt_num(999_960_000.0) == "1G"
    assert fmt_num(0.0188812) == "0.01888"
    assert fmt_num(float("nan")) == "" and fmt_num(None) == ""
    assert fmt_num(True) == "yes" and fmt_num(12) == "12" and fmt_num(123456) == "123,456"
    assert fmt_num(-2.5e-7) == "-2.5e-07"


def test_failed_runs_and_cards_escape_their_text() -> None:
    from storlab.report.html import macro

    rows = macro("failed_runs")([("k<1>", "failed", "1", "a=<b>", "x & </pre>")])
    assert "<td>k&lt;1&gt;</td>" in rows and "a=&lt;b&gt;" in rows
    assert '<pre class="stderr">x &amp; &lt;/pre&gt;</pre>' in rows
    cards = str(macro("cards")([(12345, "runs <ok>", "ok")]))
    assert cards == ('<div class="cards"><div class="card ok"><b>12,345</b>'
                     "<span>runs &lt;ok&gt;</span></div></div>")


def test_table_keeps_exact_values_and_escapes() -> None:
    df = pd.DataFrame({"name": ["<b>x</b>", "y"], "v": [1 / 3, float("nan")]})
    html = table_html(df, table_id="t")
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x" not in html
    rows = parse(html).tables["t"]
    assert rows[1][1] == ("0.3333", repr(1 / 3)) and rows[2][1] == ("", "")


# --------------------------------------------------------------------------- reports
@pytest.fixture(scope="module")
def csv_report(tmp_path_factory: pytest.TempPathFactory, storlab: Any) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("csvreport")
    space_file = d / "space.yaml"
    space_file.write_text(yaml.safe_dump(SPACE, sort_keys=False))
    df = toy_results()
    df.to_csv(d / "results.csv", index=False)
    p = storlab("report", d / "results.csv", "--space", space_file, "--coverage-by", "sched",
                "--metrics", "iops,lat_us", "--json", timeout=180)
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    html = Path(info["output"]).read_text()
    return {"info": info, "html": html, "df": df, "space": Space.from_yaml(space_file),
            "dir": d}


def test_report_numbers_are_the_analysis_numbers(csv_report: dict[str, Any]) -> None:
    a = analyze(csv_report["df"], "iops", space=csv_report["space"])
    t = parse(csv_report["html"])
    rows = {r["term"][0]: r for r in records(t.tables["effects-iops"])}
    assert set(rows) == set(a.effects["term"])
    for e in a.effects.itertuples():
        for col in ("effect", "coef", "p", "pct"):
            v = getattr(e, col)
            assert float(rows[e.term][col][1]) == pytest.approx(v, rel=1e-12, abs=1e-300)
        assert rows[e.term]["significant"][0] == ("yes" if e.significant else "no")
    # The planted effects are the ones the report calls significant.
    sig = {r for r, v in rows.items() if v["significant"][0] == "yes"}
    assert sig == {"threads", "bs", "threads:bs"}
    anova = records(t.tables["anova-resp-iops"])
    assert [r["source"][0] for r in anova] == list(a.anova["source"])
    # Recommendation: the effects model's settings and prediction.
    rec = a.recommendation
    assert "threads = 8" in csv_report["html"] and "bs = 4k" in csv_report["html"]
    assert fmt_num(rec["predicted"]) in csv_report["html"]
    data = json.loads(re.search(r'<script type="application/json" id="storlab-data">(.*?)'
                                r"</script>", csv_report["html"], re.S).group(1))
    assert data["responses"]["iops"]["effects"]["terms"][0]["term"] == a.effects["term"][0]
    assert data["responses"]["iops"]["importance"]["selected"][0]["param"] == "threads"


def test_sections_without_data_are_left_out(csv_report: dict[str, Any]) -> None:
    t = parse(csv_report["html"])
    assert csv_report["info"]["sections"] == t.sections
    # No campaign: no progress; no read/write mix in the data: no f_rw section.
    assert t.sections == ["overview", "space", "design", "results", "resp-iops", "coverage"]
    design = csv_report["html"].split('id="design"')[1].split("</section>")[0]
    assert "two-level full factorial" in design
    assert "pseudo standard error" not in csv_report["html"]  # replicated: ANOVA tests
    assert all(src.startswith("data:image/png;base64,") for src in t.imgs)
    # pareto, half-normal, main, interactions, importance; coverage bars, scatter, tree
    assert len(t.imgs) == 8
    assert "coverage-table" in t.tables
    assert not re.search(r'(src|href)="(https?:)?//', csv_report["html"])


def test_results_without_space_or_responses(tmp_path: Path) -> None:
    df = pd.DataFrame({"name": list("abcd"), "note": ["x"] * 4})
    rep = build_report(from_results(df, None, source="plain.csv"))
    assert [s.id for s in rep.sections] == ["overview", "results"]
    assert "plain.csv" in rep.html()


@pytest.mark.parametrize("response", ["y", "total_bw_bytes"])
def test_a_bare_table_shows_its_factors_beside_any_response(tmp_path: Path, storlab: Any,
                                                            response: str) -> None:
    """A results table without a space: its factors are read off beside the response the
    user names. Before, a response of their own (`y`) left the results table with y alone
    and called 4 configurations x 2 runs "8 configurations"; a size factor (bs 4k/64k)
    beside a headline metric ended in a traceback (float('4k'))."""
    rows = [{"eng": e, "bs": b, response: (10 if e == "psync" else 5) + (3 if b == "64k" else 0)
             + 0.1 * r} for r in range(2) for e in ("<b>libaio</b>", "psync")
            for b in ("4k", "64k")]
    pd.DataFrame(rows).to_csv(tmp_path / "r.csv", index=False)
    p = storlab("report", tmp_path / "r.csv", "-y", response, "-o", tmp_path / "r.html",
                timeout=180)
    assert p.returncode == 0, p.stderr
    page = (tmp_path / "r.html").read_text()
    results = page[page.index('<section id="results">'):]
    results = results[:results.index("</section>")]
    assert "<caption>8 runs; responses " in results and "then the 2 factors" in results
    assert 'data-col="eng"' in results and 'data-col="bs"' in results
    assert "&lt;b&gt;libaio&lt;/b&gt;" in results and "<b>libaio" not in page
    assert '<section id="design">' in page

def command_campaign(d: Path, **fields: Any) -> Path:
    """A campaign of a tiny Python 'benchmark' that fails for one configuration."""
    bench = ("import json, sys; t, m = int(sys.argv[1]), sys.argv[2]\n"
             "if t == 8 and m == 'b': sys.exit('disk on fire: cannot open /dev/fake')\n"
             "print(json.dumps({'ops': 100 * t + (50 if m == 'a' else 0), "
             "'lat_ms': 10.0 / t}))")
    spec = {
        "name": "cmd", "seed": 1,
        "space": {"factors": [{"name": "threads", "kind": "integer", "values": [1, 8]},
                              {"name": "mode", "kind": "categorical", "values": ["a", "b"]}],
                  "responses": [{"name": "ops", "unit": "op/s"}]},
        "design": {"kind": "full"},
        "runner": {"type": "command",
                   "options": {"command": [sys.executable, "-c", bench, "{threads}", "{mode}"],
                               "json_metrics": {"ops": "ops", "lat_ms": "lat_ms"}}},
        "repetitions": 2,
        **fields,
    }
    d.mkdir(parents=True, exist_ok=True)
    p = d / "campaign.yaml"
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    return p


def test_campaign_progress_and_failures(tmp_path: Path) -> None:
    from storlab.campaign.campaign import Campaign

    camp = command_campaign(tmp_path / "c")
    # Before anything ran: the plan is there, every run pending, no results sections.
    rep = build_report(from_campaign(camp))
    assert [s.id for s in rep.sections] == ["overview", "space", "design", "progress"]
    assert rep.data["progress"] == {"pending": 8}
    Campaign.load(camp).run()
    rep = build_report(from_campaign(camp))
    ids = [s.id for s in rep.sections]
    assert ids == ["overview", "space", "design", "progress", "results", "resp-ops"]
    assert rep.data["progress"] == {"ok": 6, "failed": 2}
    html = rep.html()
    t = parse(html)
    prog = html.split('id="progress"')[1].split("</section>")[0]
    assert "Failed runs (2)" in prog and "disk on fire" in prog and "threads=8, mode=b" in prog
    # What failed runs printed (a root run may print a root-only file) is as private as the
    # store: the report holding it is written 0600 whatever the umask; one without, as usual.
    old = os.umask(0o022)
    try:
        assert rep.write(tmp_path / "r.html").stat().st_mode & 0o777 == 0o600
        plain = build_report(from_campaign(command_campaign(tmp_path / "p")), figures=False)
        assert plain.write(tmp_path / "p.html").stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(old)
    from storlab.report import progress_plot

    fig = progress_plot(Campaign.load(camp).results("run"))
    assert fig.axes[0].get_xlabel().startswith("wall-clock time") and fig.axes[0].lines
    # A count of runs: whole numbers on its axis, on a detached Figure (no pyplot state).
    fig.canvas.draw()
    ticks = [float(x.get_text().replace("−", "-")) for x in fig.axes[0].get_yticklabels()
             if x.get_text()]
    assert ticks and all(v.is_integer() for v in ticks)
    assert fig.canvas.manager is None
    res = records(t.tables["results-table"])
    failed = [r for r in res if r["failed runs"][0] == "2"]
    assert len(failed) == 1 and failed[0]["ops"][0] == ""  # no successful run: no value
    # Three configurations left: the 2^2 misses a corner, so the main effects are
    # correlated and the report says so next to them; importance still runs.
    sec = html.split('id="resp-ops"')[1]
    assert "Parameter importance (Carver)" in sec
    assert re.search(r'class="warn">main effect \w+ is correlated', sec)


def test_cli_errors_are_one_line(tmp_path: Path, csv_report: dict[str, Any], storlab: Any
                                 ) -> None:
    d = csv_report["dir"]
    cases = [
        ([str(d / "results.csv"), "--space", str(d / "space.yaml"), "--response", "nope"],
         "nope"),
        ([str(d / "space.yaml")], "not a campaign file"),
        ([str(d / "missing.yaml")], "file not found"),
    ]
    for args, needle in cases:
        p = storlab("report", *args, timeout=120)
        assert p.returncode == 2, (args, p.stderr)
        assert needle in p.stderr and p.stderr.strip().count("\n") == 0, p.stderr


def test_design_read_off_the_data() -> None:
    from storlab.design import make_design
    from storlab.report import design_from_data

    space = Space.two_level(6)
    frac = make_design(space, "fractional", runs=16, seed=1)
    m = design_from_data(frac.table, space)
    assert m["kind"] == "two-level fraction" and m["resolution"] == 4
    assert sorted(m["defining_relation"]) == sorted(frac.meta["defining_relation"])
    assert m["wlp"] == frac.meta["wlp"]
    pb = make_design(Space.two_level(11), "pb", runs=12, seed=1)
    m = design_from_data(pb.table, Space.two_level(11))
    # Plackett-Burman: no defining relation to report, interactions correlate 1/3 with
    # main effects (a regular-fraction reading would call it resolution ≥ III and clean).
    assert m["kind"].startswith("two-level, non-regular") and "resolution" not in m
    assert m["main_orthogonal"] and m["max_main_2fi_corr"] == pytest.approx(1 / 3)
    full = make_design(Space.two_level(3), "full")
    assert design_from_data(full.table, Space.two_level(3))["kind"] == \
        "two-level full factorial"


def test_log_transform_report_matches_analyze(tmp_path: Path) -> None:
    df = toy_results()
    space = Space.from_dict(SPACE)
    a = analyze(df, "iops", space=space, transform="log")
    html = build_report(from_results(df, space), responses=["iops"], transform="log",
                        figures=False).html()
    rows = {r["term"][0]: r for r in records(parse(html).tables["effects-iops"])}
    for e in a.effects.itertuples():
        assert float(rows[e.term]["ratio"][1]) == pytest.approx(e.ratio, rel=1e-12)
    assert fmt_num(a.recommendation["predicted"]) in html
    assert "analysed as log(iops)" in html


# --------------------------------------------------------------------------- partial responses
def _report_data(html: str) -> dict[str, Any]:
    return json.loads(re.search(r'<script type="application/json" id="storlab-data">(.*?)'
                                r"</script>", html, re.S).group(1))


def test_response_on_part_of_the_runs_is_analysed_on_those_runs() -> None:
    """Read latency exists only where the runs read (rwmix = 100): the report says on how
    many configurations it is analysed, drops the factor that no longer varies, and its
    numbers are those of the analyses on that subset."""
    space = Space.from_dict({
        "factors": [{"name": "bs", "kind": "ordinal", "values": ["4k", "64k"]},
                    {"name": "rwmix", "kind": "integer", "values": [0, 100]},
                    {"name": "depth", "kind": "integer", "values": [1, 4]}]})
    rows = []
    for bs in ("4k", "64k"):
        for mix in (0, 100):
            for depth in (1, 4):
                for rep in range(2):
                    lat = (100 + 50 * (bs == "64k") + 10 * (depth == 4) + rep
                           if mix == 100 else np.nan)
                    rows.append({"bs": bs, "rwmix": mix, "depth": depth,
                                 "total_iops": 1000 + 500 * (mix == 0) - 100 * (bs == "64k")
                                 + 3 * rep, "read_clat_p99_us": lat})
    df = pd.DataFrame(rows)
    rep_ = build_report(from_results(df, space), responses=["read_clat_p99_us", "total_iops"])
    html = rep_.html()
    sec = html.split('id="resp-read-clat-p99-us"')[1].split("</section>")[0]
    # 16 rows of 8 configurations run twice: rows (runs), not configurations
    assert "read_clat_p99_us exists on 8 of 16 rows (rwmix = 100 only)" in sec
    assert "over the factors that vary among them (bs, depth)" in sec
    d = _report_data(html)["responses"]
    assert d["read_clat_p99_us"]["rows_analysed"] == 8
    assert d["read_clat_p99_us"]["factors_analysed"] == ["bs", "depth"]
    sub = df[df["rwmix"] == 100]
    a = analyze(sub, "read_clat_p99_us", space=space, factors=["bs", "depth"],
                goal="minimize")
    terms = {t["term"]: t["effect"] for t in d["read_clat_p99_us"]["effects"]["terms"]}
    assert terms == pytest.approx(dict(zip(a.effects["term"], a.effects["effect"])))
    assert set(d["read_clat_p99_us"]["importance"]["pi"]) == {"bs", "depth"}
    # A response every run has: no such note.
    assert "exists on" not in html.split('id="resp-total-iops"')[1]
    # No share of variance above 100 %, in the page's numbers or its tables.
    for r in d.values():
        for s in r.get("importance", {}).get("selected", []):
            assert 0 <= s["share"] <= 1


def test_saturated_design_gets_no_carver_path() -> None:
    """11 factors in 12 runs: the report shows each factor's PI and says the data are too
    few for a greedy selection; no "Carver path" box rests on one or two runs."""
    from storlab.design import make_design

    sp = Space.two_level(11)
    d = make_design(sp, "pb", runs=12, seed=1)
    df = d.table[sp.names].copy()
    df["total_iops"] = 1000 + 300 * df["A"] + np.random.default_rng(0).normal(0, 20, 12)
    html = build_report(from_results(df, sp), responses=["total_iops"]).html()
    assert "No greedy selection" in html and "saturated" in html
    assert "Carver path" not in html
    assert "pi-resp-total-iops" in parse(html).tables
    assert "resolution" not in html or "III" in html


def test_results_table_puts_the_responses_first() -> None:
    """With many factors the table is wider than the page; the responses come right after
    the configuration, never scrolled off the right edge."""
    sp = Space.two_level(11)
    from storlab.design import make_design

    df = make_design(sp, "pb", runs=12, seed=1).table[sp.names].copy()
    df["total_iops"] = np.arange(12.0) + 1000
    html = build_report(from_results(df, sp), responses=["total_iops"], figures=False).html()
    head = [t for t, _ in parse(html).tables["results-table"][0]]
    assert head[0] == "total_iops" and head[1:] == sp.names


def test_page_template_escapes_text_and_inlines_everything() -> None:
    """The page is the Jinja2 template (package data): title, subtitle and section names
    are escaped text, the body is the builders' HTML (Markup from macros; a plain string
    is text), CSS and script are inline."""
    from importlib.resources import files

    from markupsafe import Markup

    from storlab.report.html import page

    html = page("<T> & co", "sub <s>", [("a", "A & <b>")], Markup("<p id='x'>body</p>"),
                Markup("<i>foot</i>"))
    plain = page("t", "s", [], "<b>x</b>")
    assert "&lt;b&gt;x&lt;/b&gt;" in plain and "<b>x</b>" not in plain
    assert "<title>&lt;T&gt; &amp; co</title>" in html and "<h1>&lt;T&gt; &amp; co</h1>" in html
    assert '<a href="#a">A &amp; &lt;b&gt;</a>' in html and "sub &lt;s&gt;" in html
    assert "<p id='x'>body</p>" in html and "<footer><i>foot</i></footer>" in html
    assert 'content: " \\2195"' in html  # the CSS, its escapes intact
    assert "beforeprint" in html and html.startswith("<!DOCTYPE html>")
    tpl = files("storlab.report") / "templates"
    assert {p.name for p in tpl.iterdir()} >= {"page.html.j2", "report.css", "report.js"}


def test_report_effects_use_every_run_as_analyze_does(tmp_path: Path) -> None:
    """With repetitions, the report's effects and ANOVA are `analyze`'s (every run, the
    repeats as pure error), not a fit to configuration means with 2 error df."""
    from storlab.campaign.campaign import Campaign

    camp = command_campaign(tmp_path / "c", repetitions=3)
    Campaign.load(camp).run()
    rep = build_report(from_campaign(camp), figures=False)
    got = rep.data["responses"]["ops"]["effects"]
    want = analyze(Campaign.load(camp).results("run"), "ops",
                   space=Campaign.load(camp).space).to_dict()
    assert "Effects and ANOVA use the 9 measured runs of these 3 configurations" in rep.html()
    assert json.dumps(got["terms"]) == json.dumps(want["terms"])
    assert json.dumps(got["anova"]) == json.dumps(want["anova"])


def test_report_importance_noise_is_importance_commands(tmp_path: Path) -> None:
    """The Carver section reads every run, as `storlab importance CAMPAIGN` does: repeated
    configurations give the run-to-run noise (configuration means said 'no repeated
    configuration')."""
    from storlab.analysis.importance import importance
    from storlab.campaign.campaign import Campaign

    camp = command_campaign(tmp_path / "c", repetitions=3)
    Campaign.load(camp).run()
    rep = build_report(from_campaign(camp), figures=False)
    got = rep.data["responses"]["ops"]["importance"]
    c = Campaign.load(camp)
    want = importance(c.results("run"), "ops", params=c.space.names)
    assert want.n_repeated == 3
    assert got["n_repeated"] == want.n_repeated
    assert json.dumps(got) == json.dumps(want.to_dict())
    assert want.noise_note in rep.html()
    assert "no repeated configuration" not in rep.html()


def test_results_table_of_repeated_runs_is_labelled_as_runs() -> None:
    """A results table whose configurations ran twice (16 rows, 8 configurations) is
    analysed run by run, as `storlab analyze` does: the report says runs, not '16
    configurations' of 'per-configuration means'; a table of distinct configurations says
    configurations."""
    df = toy_results()
    space = Space.from_dict(SPACE)
    # the figures (drawn for this table by `csv_report`) are not what is checked here
    html = build_report(from_results(df, space, source="fu.csv"), figures=False).html()
    assert "<img" not in html and "<figure" not in html
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html.split("<script")[0]))
    assert "one row per run (16 runs of 8 configurations)" in text
    assert "16 runs; responses" in text
    assert "per-configuration means" not in text and "16 configurations" not in text
    imp = _report_data(html)["responses"]["iops"]["importance"]
    assert imp["n_configs"] == 8 and imp["n_repeated"] == 8
    t = parse(html).tables["importance-resp-iops"]
    assert "configurations left" in [c for c, _ in t[0]]
    first = build_report(from_results(df.iloc[:8], space, source="one.csv"),
                         figures=False).html()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", first.split("<script")[0]))
    assert "one row per configuration, as the table gives it" in text
    assert "8 configurations; responses" in text


# --------------------------------------------------------------------------- rw mix
def _rw_results(mixes: tuple[int, ...]) -> pd.DataFrame:
    """Two runs per (bs, read %) of a device whose C = T_read + 0.1 T_write holds at 0, 50
    and 100 % read (the slides' model, so the 50 % mix is on it)."""
    rows = []
    for bs, cap in (("4k", 10000.0), ("64k", 2000.0)):
        for mix in mixes:
            total = cap / (mix / 100 + 0.1 * (1 - mix / 100))
            for rep in range(2):
                t = total * (1 + 0.001 * rep)
                rows.append({"bs": bs, "rwmixread": mix, "read_iops": t * mix / 100,
                             "write_iops": t * (1 - mix / 100), "total_iops": t})
    return pd.DataFrame(rows)


def test_rwmix_with_the_two_anchors_alone_says_invariance_is_not_tested() -> None:
    """Audit MED-4: 100 % read and 100 % write alone define C, so its spread is 0 by
    construction; the section said "invariant yes". It now says not tested; a third
    mix is tested (and found invariant). (No figures: 5 s of CPU; the browser test draws
    a two-anchor report's figures.)"""
    html = build_report(from_results(_rw_results((0, 100)), None),
                        responses=["total_iops"], figures=False).html()
    t = parse(html)
    rows = records(t.tables["rwmix-table"])
    assert [r["invariant"][0] for r in rows] == [
        "not tested (only the 100 % read and 100 % write anchors)"] * 2
    assert all(r["C_spread"][0] == "" for r in rows)
    assert "whether C is invariant is not tested" in html
    html = build_report(from_results(_rw_results((0, 50, 100)), None),
                        responses=["total_iops"], figures=False).html()
    rows = records(parse(html).tables["rwmix-table"])
    assert [r["invariant"][0] for r in rows] == ["yes", "yes"]
    assert "whether C is invariant is not tested" not in html
