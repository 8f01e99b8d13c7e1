"""`simulate --sweep --campaign DIR` as root: DIR must be one no other user can change (the
rule `run` applies to a campaign's directory), or root's campaign, store and scratch area
would be made wherever that user swaps it to lead."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (another user's directory)")
def test_a_sweep_campaign_in_another_users_directory_is_refused(storlab: Any) -> None:
    top = Path(tempfile.mkdtemp(prefix="storlab-sweep-", dir="/tmp"))
    try:
        top.chmod(0o755)
        (top / "theirs").mkdir()
        os.chown(top / "theirs", 65534, 65534)
        p = storlab("simulate", ROOT / "examples" / "sim" / "small.yaml", "--requests",
                    "200", "--sweep", "clients=4,8", "--campaign", top / "theirs" / "sw",
                    timeout=180)
        assert p.returncode == 2, p.stdout + p.stderr
        err = p.stderr.strip()
        assert err.count("\n") == 0 and "owned by uid 65534" in err, err
        assert list((top / "theirs").iterdir()) == []
    finally:
        shutil.rmtree(top, ignore_errors=True)
