"""The search for a program's JSON document in its output (fio's, a command's) against
hostile output: deeply nested, or many nested lines that each start a document. One line,
no traceback, and bounded time."""

from __future__ import annotations

import json
import json.decoder
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storlab.campaign.runners.base import find_json
from storlab.campaign.runners.fio_parse import parse_json_output

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


class _Wordless(json.decoder.JSONDecodeError):
    """A decode error whose message says nothing: the C decoder looks the class up in
    `json.decoder` each time it raises, so the search must decide from positions alone."""

    def __init__(self, msg: str, doc: str, pos: int) -> None:
        super().__init__("failed", doc, pos)


@pytest.fixture
def wordless(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json.decoder, "JSONDecodeError", _Wordless)
    with pytest.raises(json.JSONDecodeError, match="^failed"):
        json.JSONDecoder().raw_decode('{"a": "open')


@pytest.mark.parametrize("size", [100, 255, 1000, 5000, 70_000])
def test_a_string_longer_than_the_first_window_is_found_whatever_the_wording(
        wordless: None, size: int) -> None:
    # the string opens early in the first window (256 bytes) and closes past it: the
    # decoder places the error at the opening quote, early in the window
    doc = {"a": "x" * size, "b": [1, 2, {"c": "y\\\"" * (size // 4)}]}
    text = "banner\n" + json.dumps(doc) + "\n" + "trailing line\n" * 50
    assert find_json(text) == doc


def test_an_error_at_a_closed_string_widens_no_window(wordless: None) -> None:
    # `{"a" "b"`: the decoder fails at the second string's quote, a string closed within
    # the window: the line's own fault, so each such line costs a few bytes and the
    # document after thousands of them is still found
    text = ('{"a" "b"' + " " * 32 + "\n") * 60_000 + DOC
    assert len(text) > 2 * (1 << 20)
    t = time.process_time()
    assert find_json(text) == {"jobs": [{"jobname": "x"}]}
    assert time.process_time() - t < 5


@settings(max_examples=40, deadline=None)
@given(doc=st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=600),
    lambda kids: st.lists(kids, max_size=6) | st.dictionaries(st.text(max_size=40), kids,
                                                              max_size=6),
    max_leaves=40).filter(lambda d: isinstance(d, (list, dict))),  # a document starts a line
       pad=st.integers(min_value=0, max_value=300))
def test_any_document_after_a_banner_is_found_whatever_the_wording(
        doc: object, pad: int) -> None:
    text = "banner " + "=" * pad + "\n" + json.dumps(doc, indent=pad % 3 or None) + \
        "\nmore output\n" * 20
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(json.decoder, "JSONDecodeError", _Wordless)
        found = find_json(text)
    assert found == doc
