"""The campaign report of a real small fio campaign, opened in headless Chromium: no
console errors, every image loaded, a full-page screenshot that shows it rendered, sortable
tables that sort, and the same numbers as `storlab analyze --json` for the same data."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
import yaml

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

pytestmark = pytest.mark.xdist_group("browser")


CAMPAIGN = {
    "name": "browser-check",
    "space": {
        "factors": [
            {"name": "bs", "kind": "ordinal", "values": ["4k", "64k"]},
            {"name": "rwmixread", "kind": "integer", "values": [0, 100], "unit": "%"},
            {"name": "iodepth", "kind": "integer", "values": [1, 4]},
        ],
        "responses": [{"name": "total_iops", "unit": "IO/s", "goal": "maximize"}],
    },
    "design": {"kind": "full"},
    "runner": {"type": "fio", "options": {"ioengine": "psync", "rw": "randrw", "size": "1M",
                                          "runtime": "300ms", "time_based": 1}},
    "repetitions": 1,
    "seed": 11,
    "timeout": 60,
}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory, storlab: Any) -> dict[str, Any]:
    """Run the campaign with the real fio, then write its report and the analyze JSON."""
    def cli(*args: str) -> str:
        p = storlab(*args, timeout=300)
        assert p.returncode == 0, p.stderr
        return p.stdout

    d = tmp_path_factory.mktemp("browser")
    camp = d / "campaign.yaml"
    camp.write_text(yaml.safe_dump(CAMPAIGN, sort_keys=False))
    cli("run", str(camp), "-q")
    report = d / "report.html"
    cli("report", str(camp), "-o", str(report))
    cli("results", str(camp), "-o", str(d / "results.csv"))
    analyzed = json.loads(cli("analyze", str(d / "results.csv"), "--response", "total_iops",
                              "--space", str(camp), "--json"))
    return {"dir": d, "report": report, "analyze": analyzed}


@pytest.fixture(scope="module")
def page(browser: Any, campaign: dict[str, Any]) -> Any:
    return browser.open(campaign["report"].resolve().as_uri())


def test_no_console_errors_and_every_image_loads(page: Any) -> None:
    assert page.errors() == []
    imgs = page.eval("Array.from(document.images).map(i => "
                     "({ok: i.complete && i.naturalWidth > 0, w: i.naturalWidth, "
                     "src: i.src.slice(0, 22), alt: i.alt}))")
    # Progress, Pareto, half-normal, main effects, interactions, importance, two f_rw plots
    assert len(imgs) >= 8, imgs
    assert all(i["ok"] for i in imgs), [i for i in imgs if not i["ok"]]
    assert all(i["src"].startswith("data:image/png") for i in imgs)  # nothing fetched
    assert all(i["alt"] for i in imgs)
    # Self-contained: no element refers to anything outside the file.
    external = page.eval("Array.from(document.querySelectorAll('[src],[href]'))"
                         ".map(e => e.getAttribute('src') || e.getAttribute('href'))"
                         ".filter(u => !u.startsWith('data:') && !u.startsWith('#'))")
    assert external == []


def test_screenshot_shows_a_rendered_page(page: Any, campaign: dict[str, Any]) -> None:
    from PIL import Image

    shot = campaign["dir"] / "report.png"
    w, h = page.screenshot(shot)
    assert w >= 1000 and h > 4000, (w, h)  # a long page of sections, not an empty one
    im = Image.open(shot)
    assert im.size == (w, h)
    gray = np.asarray(im.convert("L"))
    ink = (gray < 200).mean()  # text, tables and plots put ink on the page
    assert 0.01 < ink < 0.5, ink
    # The body text is laid out with a real font (not zero-size boxes).
    assert page.eval("document.querySelector('h1').getBoundingClientRect().height") > 20


def test_sections_present(page: Any) -> None:
    ids = page.eval("Array.from(document.querySelectorAll('main > section')).map(s => s.id)")
    assert ids[:5] == ["overview", "space", "design", "progress", "results"]
    assert "resp-total-iops" in ids and "rwmix" in ids
    nav = page.eval("Array.from(document.querySelectorAll('nav a')).map(a => a.hash)")
    assert nav == ["#" + i for i in ids]


def _effects_rows(page: Any, table_id: str) -> list[dict[str, Any]]:
    return page.eval(f"""Array.from(document.querySelectorAll('#{table_id} tbody tr')).map(r => {{
        const cells = Array.from(r.cells);
        const heads = Array.from(r.closest('table').querySelectorAll('th'))
            .map(h => h.dataset.col);
        const o = {{}};
        cells.forEach((c, i) => {{ o[heads[i]] = {{text: c.textContent, v: c.dataset.v}}; }});
        return o;
    }})""")


def _close(text: str, value: float) -> bool:
    """The displayed number (4 significant digits or a rounded whole number) is `value`."""
    text = text.replace(",", "")
    scale = {"M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}.get(text[-1:], 1.0)
    shown = float(text[:-1] if scale != 1.0 else text) * scale
    return math.isclose(shown, value, rel_tol=6e-4, abs_tol=0.51 if abs(value) >= 1000 else 0)


def test_numbers_match_storlab_analyze(page: Any, campaign: dict[str, Any]) -> None:
    ref = campaign["analyze"]
    rows = _effects_rows(page, "effects-total_iops")
    by_term = {r["term"]["text"]: r for r in rows}
    assert set(by_term) == {t["term"] for t in ref["terms"]}
    for t in ref["terms"]:
        r = by_term[t["term"]]
        for col in ("effect", "coef", "p", "pct"):
            if t[col] is None:
                assert r[col]["v"] == ""
                continue
            assert float(r[col]["v"]) == pytest.approx(t[col], rel=1e-12, abs=1e-9), col
            assert _close(r[col]["text"], t[col]), (col, r[col]["text"], t[col])
        assert r["significant"]["text"] == ("yes" if t["significant"] else "no")
    # The ANOVA table, row by row.
    anova = _effects_rows(page, "anova-resp-total-iops")
    assert [a["source"]["text"] for a in anova] == [a["source"] for a in ref["anova"]]
    for a, b in zip(anova, ref["anova"]):
        assert float(a["ss"]["v"]) == pytest.approx(b["ss"], rel=1e-9)
    # The JSON block holds the same analysis, and the recommendation shown is its own.
    data = page.eval("JSON.parse(document.getElementById('storlab-data').textContent)")
    eff = data["responses"]["total_iops"]["effects"]
    for key in ("pse", "me", "sme", "intercept"):
        if key in ref:
            assert eff[key] == pytest.approx(ref[key], rel=1e-12)
    rec = ref["recommendation"]
    text = page.eval("document.getElementById('resp-total-iops').textContent")
    if rec["settings"]:
        for s in rec["settings"]:
            assert f"{s['factor']} = {s['value']}" in text
        assert f"{rec['predicted']:,.0f}" in text
    if "pse" in ref:
        assert f"{ref['pse']:,.0f}" in text


def test_tables_sort_on_click(page: Any) -> None:
    order = page.eval("""(() => {
        const t = document.getElementById('results-table');
        const th = t.querySelector('th[data-col="total_iops"] button');
        th.click();
        const up = Array.from(t.tBodies[0].rows).map(r =>
            parseFloat(r.cells[th.parentNode.cellIndex].dataset.v));
        th.click();
        const down = Array.from(t.tBodies[0].rows).map(r =>
            parseFloat(r.cells[th.parentNode.cellIndex].dataset.v));
        return {up, down, aria: th.parentNode.getAttribute('aria-sort')};
    })()""")
    assert order["up"] == sorted(order["up"]) and len(order["up"]) == 8
    assert order["down"] == sorted(order["down"], reverse=True)
    assert order["aria"] == "descending"


@pytest.fixture(scope="module")
def wide_page(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A report of 11 factors in a 12-run Plackett-Burman and a 32-run 2^(6-1) with two
    responses, at a laptop's width: wide tables, Carver's greedy path."""
    from storlab.design import make_design
    from storlab.report import build_report, from_results
    from storlab.space import Space

    d = tmp_path_factory.mktemp("wide")
    sp = Space.two_level(11)
    df = make_design(sp, "pb", runs=12, seed=1).table[sp.names].copy()
    rng = np.random.default_rng(0)
    df["total_iops"] = 1000 + 300 * df["A"] + rng.normal(0, 20, 12)
    df["read_clat_p99_us"] = 50 - 5 * df["B"] + rng.normal(0, 1, 12)
    build_report(from_results(df, sp), responses=["total_iops", "read_clat_p99_us"]) \
        .write(d / "pb.html")
    sp6 = Space.two_level(6)
    f = make_design(sp6, "fractional", runs=32, seed=1).table[sp6.names].copy()
    f["total_iops"] = 1000 + 300 * f["A"] + 100 * f["A"] * f["B"] + rng.normal(0, 20, 32)
    build_report(from_results(f, sp6), responses=["total_iops"]).write(d / "ff.html")
    return {"pb": browser.open((d / "pb.html").as_uri(), width=1100),
            "ff": browser.open((d / "ff.html").as_uri(), width=1100), "dir": d}


def test_wide_results_table_shows_the_responses(wide_page: Any) -> None:
    """With 11 factors the results table is wider than the page: the responses come first
    and are in view without scrolling sideways."""
    page = wide_page["pb"]
    assert page.errors() == []
    view = page.eval("""(() => {
      const box = document.querySelector('#results-table').closest('.scroll')
                    .getBoundingClientRect();
      return Array.from(document.querySelectorAll('#results-table th')).map(th => {
        const r = th.getBoundingClientRect();
        return [th.dataset.col, r.left >= box.left - 1 && r.right <= box.right + 1];
      });
    })()""")
    shown = dict(view)
    assert shown["total_iops"] and shown["read_clat_p99_us"], view


def test_greedy_path_and_design_tables_fit_the_page(wide_page: Any) -> None:
    """Carver's greedy path (and every table but the wide results) fits its box: no column
    cut off at the right edge."""
    page = wide_page["ff"]
    assert page.errors() == []
    over = page.eval("Array.from(document.querySelectorAll('.scroll')).filter(d => "
                     "d.scrollWidth > d.clientWidth + 1).map(d => "
                     "(d.querySelector('table') || {}).id || '?')")
    assert not [t for t in over if t.startswith("importance-")], over
    ids = page.eval("Array.from(document.querySelectorAll('table')).map(t => t.id)")
    assert any(i.startswith("importance-") for i in ids), ids
