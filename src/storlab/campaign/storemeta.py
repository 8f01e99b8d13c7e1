"""What a store records about the campaign that wrote it, and the guards that read it: which
campaign file owns it, the measurement settings and the plan (or the adaptive source's
settings) its runs depend on, and the design's metadata readers take from it. A store is
never read as another campaign's, nor added to under other settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import CampaignError, PlanMismatch
from .fixed import Config
from .sources import adaptive_kinds, design_as_stored
from .spec import CampaignSpec
from .store import Store


def source_store(campaign_file: str | Path, kind: str) -> str:
    """The store `storlab <kind>` uses for a fixed design's file read as an adaptive
    design of that kind: never its `campaign.db`."""
    return f"{Path(campaign_file).stem}-{kind}.db"


def check_store_campaign(store: Path, campaign_file: Path) -> None:
    """Refuse a store another campaign file wrote (its meta `campaign`): read as this
    file's, it showed that campaign's runs under this one's name. A store that does not
    name its campaign (written before storlab recorded it) is taken as it is."""
    if not store.exists():
        return
    with Store(store, readonly=True) as st:
        owner = st.get_meta("campaign")
    if owner is not None and Path(owner).resolve() != campaign_file.resolve():
        raise CampaignError(f"{store}: holds the runs of another campaign file ({owner}), "
                            f"not {campaign_file}")


def check_own_store(store: Path, campaign_file: Path) -> None:
    """Refuse a file's own `store:` when another campaign file of its directory wrote it (two
    files left at the default `campaign.db`: the second "ran 0" and showed the first's runs
    as its own). A store whose recorded file has this file's name is taken (a campaign
    directory moved or copied keeps its old path in the store)."""
    if not store.is_file():
        return
    with Store(store, readonly=True) as st:
        owner = st.get_meta("campaign")
    if owner is not None and Path(owner).name != campaign_file.name:
        raise CampaignError(f"{campaign_file}: its store {store.name} holds the runs of "
                            f"another campaign file ({Path(owner).name}); give this file its "
                            "own 'store:' (two campaign files share a store only by mistake)")


def as_stored_source(spec: CampaignSpec, store: Path) -> CampaignSpec:
    """`spec` read as the adaptive design its store holds, when the store holds one and the
    file has a fixed design (`storlab tune --budget N` of a fixed design), else unchanged."""
    if spec.design.kind in adaptive_kinds() or not store.exists():
        return spec
    with Store(store, readonly=True) as st:
        meta = st.get_meta_object("source") or {}
    if meta.get("kind") not in adaptive_kinds():
        return spec
    design = design_as_stored(str(meta["kind"]), spec.design, meta)
    return spec.model_copy(update={"design": design, "repetitions": 1})


def stored_design_meta(store_path: Path, adaptive: bool) -> dict[str, Any] | None:
    """The design metadata the store keeps (key `design`; an adaptive source's store
    written before it: key `source`), None without a store or either key."""
    if not store_path.exists():
        return None
    with Store(store_path, readonly=True) as store:
        meta = store.get_meta_object("design")
        if meta is None and adaptive:
            meta = store.get_meta_object("source")
    return meta


def keep_meta(store: Store, key: str, now: dict[str, Any], what: str,
              free: tuple[str, ...] = ()) -> None:
    """Record settings the store's runs depend on; refuse to go on under others (all but
    the `free` ones), naming what changed."""
    old = store.get_meta_object(key)
    if old is not None:
        before = {k: v for k, v in old.items() if k not in free}
        after = {k: v for k, v in now.items() if k not in free}
        diff = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        if diff:
            changes = [c for k in diff for c in _changes(k, before.get(k), after.get(k))]
            detail = "; ".join(changes[:5]) + (f"; {len(changes) - 5} more"
                                               if len(changes) > 5 else "")
            raise CampaignError(f"{store.path}: {what} ({detail}); move the store "
                                "away or give it a new name ('store:' in the campaign "
                                "file)")
    store.set_meta(key, json.dumps(now))


def sync_plan(store: Store, campaign_file: Path, measurement: dict[str, Any],
              design_meta: dict[str, Any], configs: list[Config] | None,
              source_meta: dict[str, Any] | None) -> None:
    """Save the plan on the first run; refuse a store written for another plan (a table's
    `configs`, or an adaptive source's settings `source_meta`) or measured with other
    runner settings."""
    # a changed runtime, command or step would silently mix two measurements under one
    # configuration
    keep_meta(store, "measurement", measurement, "its runs were measured with other settings")
    if configs is not None:
        _sync_configs(store, campaign_file, configs)
    else:
        _sync_source(store, campaign_file, source_meta or {})
    # What readers (the report) know the design by; they never make it again.
    store.set_meta("design", json.dumps(design_meta))


def _sync_configs(store: Store, campaign_file: Path, configs: list[Config]) -> None:
    stored = store.configs()
    current = [(cid, json.loads(json.dumps(cfg)), info) for cid, cfg, info in configs]
    if not stored:
        store.save_configs(current)
        store.set_meta("campaign", str(campaign_file))
        return
    old = {cid: cfg for cid, cfg, _ in stored}
    for cid, cfg, _ in current:
        if cid in old and old[cid] != cfg:
            raise PlanMismatch(
                f"{store.path}: holds another plan (configuration {cid} was {old[cid]},"
                f" is now {cfg}); move the store away or set 'store:' to a new file")
    new = [c for c in current if c[0] not in old]
    if new:
        store.save_configs(new)


def _sync_source(store: Store, campaign_file: Path, source_meta: dict[str, Any]) -> None:
    """An adaptive store remembers its source's settings; any change but the budget
    (which may grow to continue a search) would make the history mean something else."""
    meta = json.loads(json.dumps(source_meta))
    if store.get_meta("source") is None:
        if store.configs():
            raise CampaignError(f"{store.path}: holds a fixed design's runs; set "
                                "'store:' to a new file for an adaptive design")
        store.set_meta("campaign", str(campaign_file))
    keep_meta(store, "source", meta,
              f"was written by another {meta.get('kind')} design", free=("budget",))


def _changes(path: str, a: Any, b: Any) -> list[str]:
    """`path: old -> new` for each leaf that differs between two JSON values: a changed
    argument of a long command is named, not cut off in the middle of the whole list."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [c for k in sorted(set(a) | set(b), key=str) if a.get(k) != b.get(k)
                for c in _changes(f"{path}.{k}", a.get(k), b.get(k))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [c for i, (x, y) in enumerate(zip(a, b)) if x != y
                for c in _changes(f"{path}[{i}]", x, y)]

    def short(v: Any) -> str:
        r = repr(v)
        return r if len(r) <= 120 else r[:117] + "..."
    return [f"{path}: {short(a)} -> {short(b)}"]
