"""One style for every figure: readable labels with units, legends that match what they
name, every plot kind renders, and importing or drawing never switches a user's backend."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.colors import to_hex

from storlab.plotstyle import axis_label, metric_name, metric_unit

ROOT = Path(__file__).resolve().parents[1]


def _gallery():  # noqa: ANN202 - the script as a module
    spec = importlib.util.spec_from_file_location("plot_gallery",
                                                  ROOT / "scripts" / "plot_gallery.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(("name", "label"), [
    ("ops_s", "throughput (ops/s)"),
    ("total_bw_bytes", "total bandwidth (B/s)"),
    ("read_iops", "read I/O rate (IO/s)"),
    ("lat_mean_ms", "mean latency (ms)"),
    ("lat_p99_ms", "latency p99 (ms)"),
    ("read_clat_p99_us", "read completion latency p99 (µs)"),
    ("write_clat_mean_us", "write mean completion latency (µs)"),
    ("get_lat_p99_ms", "GET latency p99 (ms)"),
    ("mb_s", "bandwidth (MB/s)"),
    ("usr_cpu", "user CPU (%)"),
    ("read_bw", "read bandwidth (KiB/s)"),  # fio's own field is KiB/s
])
def test_storlab_columns_get_readable_labels_with_units(name: str, label: str) -> None:
    assert axis_label(name) == label


def test_unknown_names_stay_and_a_given_unit_wins() -> None:
    assert metric_name("distance") == "distance"
    assert axis_label("distance") == "distance"
    assert axis_label("distance", "m") == "distance (m)"
    assert metric_unit("total_iops", "ops/s") == "ops/s"


def _pareto(significant: bool = True):  # noqa: ANN202
    from storlab.analysis.effects import analyze
    from storlab.design import full_factorial
    from storlab.space import Space

    t = full_factorial(Space.two_level(4)).table.copy()
    x = t[["A", "B", "C", "D"]].to_numpy(dtype=float)
    rng = np.random.default_rng(0)
    if significant:
        t["total_iops"] = 5e4 + 9e3 * x[:, 0] + rng.normal(0, 500, len(t))
    else:  # noise only (seed 1: Lenth and ANOVA find nothing)
        t["total_iops"] = 5e4 + np.random.default_rng(1).normal(0, 500, len(t))
    a = analyze(t, "total_iops")
    return a, a.plot("pareto")


def test_pareto_legend_swatches_have_the_colours_of_the_bars_they_name() -> None:
    from storlab.plotstyle import STYLE

    a, fig = _pareto()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    bar_colour = {lab: to_hex(p.get_facecolor()) for lab, p in zip(labels, ax.patches)}
    leg = ax.get_legend()
    swatch = {t.get_text(): to_hex(h.get_facecolor())
              for t, h in zip(leg.get_texts(), leg.legend_handles)
              if t.get_text() in ("significant", "not significant")}
    assert swatch == {"significant": to_hex(STYLE["sig"]), "not significant": to_hex(STYLE["bar"])}
    # ...and each is the colour of the bars it names (A, planted, is significant).
    sig = dict(zip(a.effects["term"], a.effects["significant"]))
    assert sig["A"] and not all(sig.values())
    for term, s in sig.items():
        assert bar_colour[term] == swatch["significant" if s else "not significant"], term
    # One bar per term and no empty helper bar behind a legend entry.
    assert len(ax.patches) == len(labels)
    assert "|effect| on total I/O rate (IO/s)" == ax.get_xlabel()


def test_pareto_without_significant_effects_shows_no_significant_swatch() -> None:
    a, fig = _pareto(significant=False)
    assert not a.effects["significant"].any()
    leg = fig.axes[0].get_legend()
    texts = [t.get_text() for t in leg.get_texts()]
    assert "significant" not in texts


#: Run in a fresh interpreter (a notebook user's session): pick a backend, import every storlab
#: module, draw every plot kind of the gallery (scripts/plot_gallery.py) and save it as a PNG,
#: then print (as JSON) each figure's axis labels, its titles, and the backend after it all.
_GALLERY = """
import importlib, json, pkgutil, sys
import matplotlib
matplotlib.use("svg")
import storlab
for m in pkgutil.walk_packages(storlab.__path__, "storlab."):
    importlib.import_module(m.name)
from storlab.fileio import save_figure
sys.path.insert(0, sys.argv[1])
import plot_gallery
figs, titles = {}, []
for name, fig in plot_gallery.draw_all():
    figs[name] = [(ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes]
    titles += [(name, t.get_text()) for f in (fig, *fig.subfigs) for t in f.texts]
    titles += [(name, ax.get_title()) for ax in fig.axes]
    titles += [(name, f._suptitle.get_text()) for f in (fig, *fig.subfigs)
               if f._suptitle is not None]
    save_figure(fig, sys.argv[2] + "/" + name + ".png")
print(json.dumps({"figs": figs, "titles": titles, "backend": matplotlib.get_backend()}))
"""


@pytest.fixture(scope="module")
def gallery(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Every plot kind drawn once, in one process of its own (`_GALLERY`; the gallery costs
    ~15 s of CPU): (the folder of its PNGs, what it printed)."""
    out = tmp_path_factory.mktemp("gallery")
    p = subprocess.run([sys.executable, "-c", _GALLERY, str(ROOT / "scripts"), str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return out, json.loads(p.stdout.strip().splitlines()[-1])


def test_every_plot_kind_renders_with_units_on_its_value_axes(
        gallery: tuple[Path, dict[str, Any]]) -> None:
    """The gallery (scripts/plot_gallery.py) draws every kind; each PNG is written and the
    value axes name their unit."""
    folder, drawn = gallery
    figs = drawn["figs"]
    titles = [tuple(t) for t in drawn["titles"]]
    expected = {"effects-pareto", "effects-halfnormal", "effects-main", "effects-interaction",
                "effects-pb-interaction", "importance", "importance-cpi",
                "importance-subsets", "importance-path", "importance-eval",
                "importance-compare", "coverage-scatter", "coverage-dendrogram",
                "coverage-coverage", "estimate-model", "estimate-prediction", "sim-sweep",
                "sim-calibration", "tune", "tune-eval", "report-progress"}
    assert set(figs) == expected
    for name in expected:
        data = (folder / f"{name}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 4_000, name
    # A user has not read the papers storlab follows: no "Figure 5:", "seed 001", "paper".
    assert len(titles) > 10
    jargon = re.compile(r"\bFigure \d|\bseed 0\d\d|\bpaper\b|\bsec\. \d|\beq\. \d", re.I)
    assert [t for t in titles if jargon.search(t[1])] == []
    labels = {n: " | ".join(f"{x} / {y}" for x, y in axes) for n, axes in figs.items()}
    for name, unit in [("effects-pareto", "(IO/s)"), ("effects-main", "(IO/s)"),
                       ("effects-halfnormal", "(IO/s)"), ("importance", "(B/s)"),
                       ("importance-subsets", "(B/s)"), ("importance-path", "(B/s)"),
                       ("estimate-model", "(IO/s)"), ("estimate-prediction", "(IO/s)"),
                       ("sim-sweep", "throughput (ops/s)"), ("sim-sweep", "latency p99 (ms)"),
                       ("sim-calibration", "(ops/s)"), ("tune", "(B/s)"), ("tune", "(µs)"),
                       ("importance-eval", "(%"), ("tune-eval", "(%"),
                       ("report-progress", "(count)")]:
        assert unit in labels[name], (name, labels[name])
    for name, text in labels.items():  # no raw storlab column name on any axis
        for raw in ("ops_s", "total_bw_bytes", "total_iops", "lat_p99_ms", "read_clat"):
            assert raw not in text, (name, text)


def test_importance_figures_2_and_3() -> None:
    """Seed 001: Figure 2 (a bar panel per greedy step, the chosen bar highlighted) and
    Figure 3 (mean against RSD of every set fixed by one or two parameters)."""
    from storlab.analysis.importance import importance
    from storlab.plotstyle import STYLE

    df = _gallery()._grid()
    params = ["bs", "iodepth", "scheduler", "numjobs"]
    res = importance(df, "total_bw_bytes", params=params, stop="top:2")
    fig = res.plot("cpi")
    assert len(fig.axes) == 2
    for ax, step in zip(fig.axes, res.steps):
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        chosen = [to_hex(p.get_facecolor()) for p in ax.patches]
        assert chosen[ticks.index(step.param)] == to_hex(STYLE["sig"])
        assert chosen.count(to_hex(STYLE["sig"])) == 1
    sets = res.subsets()
    n_one = sum(df[p].nunique() for p in params)
    assert (sets["n_fixed"] == 1).sum() == n_one
    one = sets[sets["fixed"] == "bs=64k"].iloc[0]
    cfg = res.configs[res.configs["bs"] == "64k"]["total_bw_bytes"]
    assert one["mean"] == pytest.approx(cfg.mean())
    assert one["rsd"] == pytest.approx(cfg.std(ddof=1) / cfg.mean())
    ax = res.plot("subsets").axes[0]
    assert sum(len(c.get_offsets()) for c in ax.collections[:2]) == len(sets)
    with pytest.raises(Exception, match="plot kind"):
        res.plot("pie")


def test_importing_and_drawing_keeps_the_users_backend(
        gallery: tuple[Path, dict[str, Any]]) -> None:
    """A notebook user's backend survives importing every storlab module and drawing every
    plot kind (the same process as the test above): library code never calls
    matplotlib.use."""
    folder, drawn = gallery
    assert drawn["backend"] == "svg"
    assert (folder / "sim-sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_effects_on_a_log_response_tick_plain_numbers_not_milli() -> None:
    """Audit LOW-1: on log(total_iops) the effects are below 1 and the Pareto axis read
    "500m" (matplotlib's EngFormatter). Ticks, and the Lenth labels beside them, are now
    plain below 1000; large values keep their k/M prefix."""
    from storlab.analysis.effects import analyze
    from storlab.design import full_factorial
    from storlab.plotstyle import eng
    from storlab.space import Space

    t = full_factorial(Space.two_level(4)).table.copy()
    x = t[["A", "B", "C", "D"]].to_numpy(dtype=float)
    t["total_iops"] = 5e4 * np.exp(0.6 * x[:, 0] + np.random.default_rng(0).normal(0, 0.02,
                                                                                    len(t)))
    a = analyze(t, "total_iops", transform="log")
    for kind in ("pareto", "halfnormal"):
        ax = a.plot(kind).axes[0]
        values = ax.get_xticks()
        ticks = ax.xaxis.get_major_formatter().format_ticks(values)
        assert 0 < values[1] < 1, values  # sub-unit ticks, where "m" came in
        assert [float(s) for s in ticks] == pytest.approx(list(values)), ticks
        legend = [s.get_text() for s in ax.get_legend().get_texts()]
        assert any(s.startswith("Lenth ME 0.") for s in legend), legend
    assert (eng(0.0015), eng(94_900), eng(999_960), eng(-0.5)) == ("0.0015", "94.9k", "1M",
                                                                  "-0.5")
    ax = _pareto()[1].axes[0]
    ticks = ax.xaxis.get_major_formatter().format_ticks(ax.get_xticks())
    assert "10k" in ticks, ticks


@pytest.mark.parametrize("case", ["matplotlibrc", "dollar-level"])
def test_report_ignores_local_matplotlibrc_and_draws_dollars_as_text(
        tmp_path: Path, storlab_argv: list[str], case: str) -> None:
    """A5-15: a `matplotlibrc` in the working directory (`text.usetex: True`) crashed
    `storlab report` (latex not found); with TeX it would typeset a campaign's labels as
    root. A5-3: a level `$\\frac{1}{$` crashed it in mathtext. The real program, in a
    fresh process (matplotlib reads ./matplotlibrc as it is imported)."""
    import pandas as pd
    import yaml

    odd = "$\\frac{1}{$" if case == "dollar-level" else "b"
    if case == "matplotlibrc":
        (tmp_path / "matplotlibrc").write_text("text.usetex: True\nsavefig.dpi: 3\n")
    space = {"name": "m", "factors": [
        {"name": "t", "kind": "integer", "values": [1, 8]},
        {"name": "s", "kind": "categorical", "values": ["a", odd]}],
        "responses": [{"name": "iops", "goal": "maximize"}]}
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(space))
    rows = [{"t": t, "s": s, "iops": 100 + 50 * (t == 8) + 20 * (s == "a") + r}
            for r in range(2) for t in (1, 8) for s in ("a", odd)]
    pd.DataFrame(rows).to_csv(tmp_path / "res.csv", index=False)
    p = subprocess.run([*storlab_argv, "report", "res.csv", "--space", "space.yaml",
                        "-o", "r.html"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    html = (tmp_path / "r.html").read_text()
    assert "data:image/png;base64," in html
    if case == "dollar-level":
        assert "$\\frac{1}{$" in html
