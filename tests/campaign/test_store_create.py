"""A new store appears complete or not at all (three `storlab run`s started at once on a new
campaign: two read the store while the first was still creating its tables and exited
"not a campaign store"), and a store a newer storlab wrote is refused, never reused."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from storlab.campaign.store import FORMAT, Store
from storlab.errors import CampaignError


def test_a_reader_never_sees_a_half_created_store(tmp_path: Path) -> None:
    seen: list[str] = []
    stop = threading.Event()
    paths = [tmp_path / f"s{i}.db" for i in range(30)]

    def read() -> None:
        while not stop.is_set():
            for p in paths:
                if p.exists():
                    try:
                        Store(p, readonly=True).close()
                    except CampaignError as exc:
                        if "not a campaign store" in str(exc) or "usable" in str(exc):
                            seen.append(str(exc))

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for p in paths:
            Store(p).close()
    finally:
        stop.set()
        for t in readers:
            t.join()
    assert not seen, seen[0]
    assert not list(tmp_path.glob(".*.new*"))  # no temporary store left behind


def test_two_writers_creating_one_store_share_it(tmp_path: Path) -> None:
    p = tmp_path / "c.db"
    errors: list[BaseException] = []

    def make() -> None:
        try:
            Store(p).close()
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    ts = [threading.Thread(target=make) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    with Store(p, readonly=True) as st:
        assert st.get_meta("campaign") is None


@pytest.mark.parametrize("readonly", [False, True])
def test_a_store_from_a_newer_storlab_is_refused(tmp_path: Path, readonly: bool) -> None:
    p = tmp_path / "c.db"
    Store(p).close()
    db = sqlite3.connect(p)
    db.execute(f"PRAGMA user_version={FORMAT + 1}")
    db.close()
    before = p.read_bytes()
    with pytest.raises(CampaignError, match="written by a newer storlab"):
        Store(p, readonly=readonly)
    assert p.read_bytes() == before


def test_a_file_system_without_hard_links_still_gets_its_store(tmp_path: Path,
                                                               monkeypatch: Any) -> None:
    """vfat and some FUSE/SMB mounts refuse link(): the store is renamed into place."""
    import errno

    def no_link(src: Any, dst: Any) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_link)
    s = Store(tmp_path / "c.db")
    s.db.close()
    assert Store(tmp_path / "c.db", readonly=True).db is not None
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".new")]
