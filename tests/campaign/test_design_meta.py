"""The store keeps the design's metadata (meta key `design`: kind, resolution, generators,
defining relation, aliases, word-length pattern, seed; an adaptive source's strategy), and
readers (the report) take it from there; a store written before it was kept falls back to
the campaign file's design."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from storlab.campaign.campaign import Campaign
from storlab.campaign.store import Store
from storlab.design import make_design
from storlab.errors import StorlabError
from storlab.report.build import from_campaign

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)


def same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Equal but for the generator search's timing (it differs between two makes)."""
    def drop(m: dict[str, Any] | None) -> Any:
        return None if m is None else {k: v for k, v in m.items() if k != "search"}
    return drop(a) == drop(b)


def stored(camp: Campaign) -> dict[str, Any] | None:
    with Store(camp.store_path) as st:
        text = st.get_meta("design")
    return None if text is None else json.loads(text)


def test_a_fractional_design_keeps_its_provenance_in_the_store(
        tmp_path: Path, integer_campaign: Callable[..., Path]) -> None:
    camp = Campaign.load(integer_campaign(tmp_path, {"kind": "fractional", "runs": 8}))
    assert camp.run().ok == 8
    meta = stored(camp)
    want = make_design(camp.space, "fractional", runs=8, seed=3, randomize_order=False).meta
    assert meta is not None and meta["kind"] == "fractional" and meta["resolution"] == 3
    for key in ("generators", "defining_relation", "wlp", "aliases", "seed"):
        assert meta[key] == json.loads(json.dumps(want[key])), key
    assert camp.design_meta() == meta

    # the report shows what the store says (it does not make the design again)
    with Store(camp.store_path) as st:
        with st.writer_lock():
            st.set_meta("design", json.dumps({**meta, "generators": ["D=AB", "E=AC"],
                                              "note": "from the store"}))
    inp = from_campaign(camp.path)
    assert inp.design_meta is not None and inp.design_meta["note"] == "from the store"
    assert inp.design_origin == "campaign design"


def test_an_old_store_without_the_metadata_falls_back_to_the_campaign_file(
        tmp_path: Path, integer_campaign: Callable[..., Path]) -> None:
    camp = Campaign.load(integer_campaign(tmp_path, {"kind": "fractional", "runs": 8}))
    camp.run()
    meta = stored(camp)
    con = sqlite3.connect(camp.store_path)  # as a store written by an older storlab
    con.execute("DELETE FROM meta WHERE key = 'design'")
    con.commit()
    con.close()
    again = Campaign.load(camp.path)
    assert stored(again) is None and same(again.design_meta(), meta)
    inp = from_campaign(camp.path)
    assert same(inp.design_meta, meta)
    again.run()  # a resume by this storlab writes it
    assert same(stored(again), meta)


def test_csv_and_literal_designs_say_so_and_the_report_reads_them_off_the_data(
        tmp_path: Path, integer_campaign: Callable[..., Path]) -> None:
    configs = [{f"x{i}": (1 if (j >> i) & 1 else 2) for i in range(2)} for j in range(4)]
    camp = Campaign.load(integer_campaign(tmp_path, {"configs": configs}, factors=2))
    camp.run()
    assert stored(camp) == {"kind": "configs"}
    inp = from_campaign(camp.path)
    assert inp.design_origin == "read off the results table"


def test_an_adaptive_source_keeps_its_strategy(
        tmp_path: Path, integer_campaign: Callable[..., Path]) -> None:
    p = integer_campaign(tmp_path, {"kind": "tune", "budget": 6, "strategy": "random",
                                    "objectives": [{"y": "maximize"}]}, factors=2)
    camp = Campaign.load(p)
    camp.run()
    meta = stored(camp)
    assert meta is not None and meta["kind"] == "tune" and meta["strategy"] == "random"
    assert meta["budget"] == 6 and "seed" in meta
    inp = from_campaign(p)
    assert inp.design_meta == {"kind": "tune (random, budget 6 runs)"}


def test_a_store_tuned_on_an_undeclared_response_keeps_its_recorded_goal(
        tmp_path: Path, integer_campaign: Callable[..., Path]) -> None:
    """An undeclared response needs its goal said; a store tuned when `objectives: [y]`
    meant maximize (its design metadata says so) is still read: status and report loaded
    the file and refused it."""
    p = integer_campaign(tmp_path, {"kind": "tune", "budget": 6, "strategy": "random",
                                    "objectives": [{"y": "maximize"}]}, factors=2)
    Campaign.load(p).run()
    spec = yaml.safe_load(p.read_text())
    spec["design"]["objectives"] = ["y"]  # the file as it was written then
    p.write_text(yaml.safe_dump(spec, sort_keys=False))
    camp = Campaign.load(p)
    assert [(o.name, o.goal) for o in camp.source.objectives] == [("y", "maximize")]
    assert from_campaign(p).design_meta == {"kind": "tune (random, budget 6 runs)"}
    camp.store_path.rename(tmp_path / "old.db")  # no store: the goal must be said
    with pytest.raises(StorlabError, match="goal is unknown"):
        Campaign.load(p)


def test_design_resolution_is_read_as_the_cli_reads_it(
        tmp_path: Path, storlab, integer_campaign: Callable[..., Path]) -> None:
    """`resolution: V` in a campaign file is what `--resolution V` is (it was rejected:
    'Input should be a valid integer'); a bad spelling is one line, exit 2, for both."""
    want = make_design(Campaign.load(integer_campaign(tmp_path / "int", {
        "kind": "fractional", "resolution": 5})).space, "fractional", resolution=5,
        seed=3, randomize_order=False)
    for i, spelling in enumerate(("V", "v", "5", 5)):
        camp = Campaign.load(integer_campaign(tmp_path / f"c{i}", {
            "kind": "fractional", "resolution": spelling}))
        assert camp.spec.design.resolution == 5
        assert len(camp.plan()) == want.runs == 16
    bad = integer_campaign(tmp_path / "bad", {"kind": "fractional", "resolution": "VX"})
    r = storlab("status", bad)
    cli = storlab("design", "--factors", "5", "--resolution", "VX")
    for out in (r, cli):
        assert out.returncode == 2 and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
        assert "'VX' must be III, IV, V, ... XVI (or 3, 4, 5, ... 16)" in out.stderr
