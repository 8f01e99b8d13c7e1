"""The search for a program's JSON document in its output (fio's, a command's) against
hostile output: deeply nested, or many nested lines that each start a document. One line,
no traceback, and bounded time."""

from __future__ import annotations

import time

import pytest

from storlab.campaign.runners.base import find_json
from storlab.campaign.runners.fio import parse_json_output

DOC = '{"jobs": [{"jobname": "x"}]}\n'


def _junk(mib: int) -> str:
    block = "".join("{" * 1 + "\n" for _ in range(450)) + "x\n"
    return block * (mib * (1 << 20) // len(block))


def test_deep_nesting_is_one_line_not_a_recursion_error() -> None:
    deep = "[" * 200_000 + "\n"
    with pytest.raises(ValueError, match="JSON document"):
        parse_json_output("{" * 200_000 + "\n")
    with pytest.raises(ValueError, match="JSON document"):
        find_json(deep)
    assert parse_json_output("{" * 200_000 + "\n" + DOC)["jobs"][0]["jobname"] == "x"


def test_four_mib_of_nested_junk_is_refused_or_parsed_quickly() -> None:
    junk = _junk(4)
    t = time.process_time()
    with pytest.raises(ValueError, match="JSON document"):
        parse_json_output(junk)
    with pytest.raises(ValueError, match="JSON document"):
        find_json(junk)
    assert time.process_time() - t < 5  # was 85 s of CPU before the bound
    assert find_json("banner\n" + DOC) == {"jobs": [{"jobname": "x"}]}
