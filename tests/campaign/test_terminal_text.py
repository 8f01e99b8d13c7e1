"""What runs print and what campaigns name reaches the operator's terminal as text: no
escape sequence a terminal would obey (a title, a cursor move, a hyperlink), no Rich
markup parsed (a level `[/]` crashed `status`). Real campaigns, real programs (A5-1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

STORLAB_FORKED = True  # `storlab` calls forked from the started program (conftest.py)

ESC_LEVEL = "\x1b]0;TITLE\x07\x1b[31mRED\x1b[0m\x9b2J"
LINK_LEVEL = "[link=https://evil.example]click[/link]"


def _campaign(d: Path, factor: str, levels: list[str], command: str,
              regex: list[str]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "campaign.yaml").write_text(yaml.safe_dump({
        "name": "t", "timeout": 30, "repetitions": 1, "design": {"kind": "full"},
        "space": {"factors": [{"name": factor, "kind": "categorical", "values": levels}],
                  "responses": [{"name": "v", "goal": "minimize"}]},
        "runner": {"type": "command", "options": {"command": ["sh", "-c", command],
                                                  "regex_metrics": regex}}},
        allow_unicode=False))
    return d / "campaign.yaml"


def test_run_output_and_levels_reach_the_terminal_as_text(tmp_path: Path, storlab: Any
                                                          ) -> None:
    camp = _campaign(tmp_path / "c", "x", ["[/]", LINK_LEVEL, ESC_LEVEL],
                     'printf "%s\\n" "$STORLAB_X" >&2; exit 3', [])
    run = storlab("run", camp, timeout=120)
    status = storlab("status", camp, timeout=120)
    assert status.returncode == 0, status.stderr  # `[/]` was a MarkupError traceback
    for p in (run, status):
        out = p.stdout + p.stderr
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out, out
        assert "Traceback" not in out, out
    assert "\\x1b]0;TITLE\\x07" in run.stderr + run.stdout
    shown = status.stdout
    assert "\\x1b]0;TITLE\\x07\\x1b[31mRED" in shown, shown  # shown, not obeyed
    assert LINK_LEVEL in shown and "[/]" in shown, shown  # markup shown as written


def test_a_factor_named_with_markup_prints_in_results(tmp_path: Path, storlab: Any) -> None:
    camp = _campaign(tmp_path / "c", "x[/]", ["c", "d"], "echo v=1", [r"v=(?P<v>\d+)"])
    assert storlab("run", camp, timeout=120).returncode == 0
    p = storlab("results", camp, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "x[/]" in p.stdout and "Traceback" not in p.stderr
