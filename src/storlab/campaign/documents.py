"""Each measured run's program document (a runner's `document`: fio's own JSON output,
warnings stripped, as fio-plot and other fio tools read it) as a plain file
`c<config>-r<repetition>.json`: written beside the store as each run finishes, or exported
from the store into a directory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..fileio import open_output_dir, write_in_dir
from .runners import runner_class
from .spec import CampaignError
from .store import Store


def documents_dir(store_path: Path, runner_type: str) -> Path:
    """Where each measured run's program document goes as it finishes, for a runner
    that has one: `<store's directory>/<store's name without .db>-<runner type>/`
    (campaign.db -> campaign-fio/, tune.db -> tune-fio/)."""
    return store_path.parent / f"{store_path.stem}-{runner_type}"


def write_document(doc: dict[str, Any] | None, directory: Path, config_id: int,
                   repetition: int, runner_type: str, home: Path, private: bool = False,
                   home_fd: int | None = None) -> Path | None:
    """One run's document as `directory/c<config>-r<repetition>.json`; None without
    one. Never through a link a run's program could have planted beside the store (the
    campaign's directory `home` holds it). `private`: the file 0600 in a directory made
    0700, as the store and the runs' output streams (a run's own document, written as it
    finishes); otherwise (an export the user asks for) the file is 0600 too, in the
    directory given (made with the umask when missing)."""
    if doc is None:
        return None
    for field, v in (("config_id", config_id), ("repetition", repetition)):
        # the name is made from them: a crafted store's text ("1/../../x") would lead the
        # file out of `directory`
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise CampaignError(f"{directory}: a stored run's {field} {v!r} is not a "
                                "whole number (a store storlab did not write); refused")
    return write_in_dir(directory, f"c{config_id}-r{repetition}.json",
                        json.dumps(doc, indent=2) + "\n",
                        what=f"{runner_type} JSON directory", home=home, home_fd=home_fd,
                        mode=0o600, dir_mode=0o700 if private else 0o777)


def export_documents(store_path: Path, runner_type: str, directory: Path, home: Path
                     ) -> list[Path]:
    """Write each successful measured run's program document in the store to `directory`
    as `c<config>-r<repetition>.json`, each `0600` whatever the umask (it holds what a
    run's program printed, a root-only file read inside the walls too: as private as the
    store and the runs' output files). Returns the files written; none for a runner
    without documents."""
    document = getattr(runner_class(runner_type), "document", None)
    if not store_path.exists():
        raise CampaignError(f"{store_path}: no store yet; run the campaign first")
    if document is None:
        return []
    with Store(store_path, readonly=True) as store:
        runs = [r for r in store.runs(with_raw=True) if not r["warmup"]
                and r["status"] == "ok"]
    directory = Path(directory)
    # the user's directory (as root: judged, then made and held from `/` without following
    # a link; another user's link on the way had root make it in a root-only directory)
    dfd = open_output_dir(directory, f"--{runner_type}-json")
    out = []
    try:
        for r in runs:
            path = write_document(document(r["raw"]), directory, r["config_id"],
                                  r["repetition"], runner_type, directory, home_fd=dfd)
            if path is not None:
                out.append(path)
    finally:
        os.close(dfd)
    return out
