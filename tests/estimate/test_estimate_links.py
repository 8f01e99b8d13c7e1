"""`estimate measure` as root beside another user's files: a link planted in the --target
directory or as the --campaign path must not decide where root creates files. Real fio,
real CLI, a real unprivileged owner (uid 65534)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)
NOBODY = 65534
pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root (another owner)"),
              pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")]

MEASURE = ("--sizes", "4k", "--repeats", "1", "--runtime", "1", "--file-size", "4m")


def _one_line_refusal(p: Any, *words: str) -> None:
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), p.stderr


def test_a_link_in_another_users_target_directory_makes_nothing(tmp_path: Path,
                                                                storlab: Any) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, NOBODY, NOBODY)  # a user's directory
    made = tmp_path / "made-by-root"  # stands for /etc/nologin
    for name in (".storlab-odirect-probe", "storlab-estimate.dat"):
        (shared / name).symlink_to(made)
        os.lchown(shared / name, NOBODY, NOBODY)
    p = storlab("estimate", "measure", "--campaign", tmp_path / "est", "--target",
                f"{shared}/", *MEASURE, timeout=180)
    _one_line_refusal(p, "--target", "owned by")
    assert not made.exists()
    assert not (tmp_path / "est").exists()  # refused before the first write


def test_a_link_as_the_campaign_path_writes_nothing_where_it_leads(tmp_path: Path,
                                                                   storlab: Any) -> None:
    victim = tmp_path / "root-only"
    victim.mkdir(mode=0o700)
    link = tmp_path / "est"
    link.symlink_to(victim)
    os.lchown(link, NOBODY, NOBODY)
    p = storlab("estimate", "measure", "--campaign", link, *MEASURE, timeout=180)
    _one_line_refusal(p, "--campaign", "symbolic link owned by")
    assert list(victim.iterdir()) == []


def test_a_link_swapped_in_below_the_campaign_is_not_followed(tmp_path: Path,
                                                              storlab: Any) -> None:
    """`data/` (the scratch file's directory) is made from the campaign directory's
    descriptor: a link there is refused, not written through."""
    victim = tmp_path / "root-only"
    victim.mkdir(mode=0o700)
    est = tmp_path / "est"
    est.mkdir()
    (est / "data").symlink_to(victim)
    p = storlab("estimate", "measure", "--campaign", est, *MEASURE, timeout=180)
    _one_line_refusal(p, "data", "symbolic link")
    assert list(victim.iterdir()) == []
