"""A property: whatever YAML space or campaign file, whatever CSV table a user gives, storlab
answers with a result (exit 0) or one line (exit 2), never a traceback. The files are made
from fragments users actually write and get wrong: unquoted YAML 1.1 words, dates, anchors,
tags, huge and non-finite numbers, reserved and empty names, duplicate keys and columns.

Runs in this process (`storlab_main`), a modest number of examples: a few seconds."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SCALARS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["on", "off", "yes", "no", "y", "n", "true", "false", "~", "null",
                     "2024-01-31", "2001-12-14t21:59:43.10-05:00", "!!binary aGk=", ".inf",
                     "-.inf", ".nan", "1e308", "1.0e+400", "''", '""', "[]", "{}", "4k",
                     "64KiB", "1.5M", "-0", "0x1F", "0o17", "1_000", "12:30:00", "!!str x",
                     "!!python/object:os.system x", "&a 1", "*a", "'\\0'", '"\\0"', "|",
                     "[" * 3000 + "]" * 3000]),
    st.text(alphabet="abcxyz019 -_.{}", min_size=0, max_size=6),
)
NAMES = st.one_of(st.sampled_from(["a", "b", "c", "config_id", "run", "Run", "_x", "", "''",
                                   "seed", "workdir", "a", "A b", "x.y", "on", "1"]),
                  st.text(alphabet="abcXYZ_.-", min_size=1, max_size=5))
KINDS = st.sampled_from(["categorical", "ordinal", "integer", "real", "bogus", "on"])


def _flow(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


@st.composite
def factor(draw: st.DrawFn) -> str:
    parts = [f"name: {draw(NAMES)}"]
    if draw(st.booleans()):
        parts.append(f"kind: {draw(KINDS)}")
    if draw(st.booleans()):
        parts.append(f"values: {_flow(draw(st.lists(SCALARS, max_size=5)))}")
    else:
        parts.append(f"range: {_flow(draw(st.lists(SCALARS, min_size=1, max_size=3)))}")
    for key in ("low", "high", "center", "default", "log"):
        if draw(st.integers(0, 4)) == 0:
            parts.append(f"{key}: {draw(SCALARS)}")
    if draw(st.integers(0, 8)) == 0:
        parts.append(parts[0])  # a duplicate key
    return "  - {" + ", ".join(parts) + "}\n"


@st.composite
def space_text(draw: st.DrawFn) -> str:
    text = "factors:\n" + "".join(draw(st.lists(factor(), min_size=1, max_size=4)))
    if draw(st.booleans()):
        text += f"constraints: {_flow([repr(draw(st.text('ab<=>!1 ', max_size=8)))])}\n"
    if draw(st.booleans()):
        text += f"responses: [{{name: {draw(NAMES)}, goal: {draw(SCALARS)}}}]\n"
    return text


@st.composite
def campaign_text(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["full", "lhs", "pb", "fractional", "tune", "bogus"]))
    lines = ["space: space.yaml" if draw(st.booleans()) else
             "space: {factors: [{name: a, values: [1, 2]}, {name: b, values: [x, y]}]}",
             f"design: {{kind: {kind}, runs: {draw(SCALARS)}, budget: {draw(SCALARS)}}}",
             "runner: {type: %s, options: {command: [echo, '{%s}'], regex_metrics: [%s]}}"
             % (draw(st.sampled_from(["command", "fio", "postmark", "nope"])),
                draw(NAMES), draw(st.sampled_from(["'n (?P<n>\\d+)'", "'('", ""])))]
    for key in ("repetitions", "timeout", "seed", "warmup", "store", "workdir", "randomize",
                "name", "vars"):
        if draw(st.integers(0, 3)) == 0:
            lines.append(f"{key}: {draw(SCALARS)}")
    if draw(st.booleans()):
        lines.append(f"setup: [{{run: 'echo {{{draw(NAMES)}}}', shell: {draw(SCALARS)}}}]")
    return "\n".join(lines) + "\n"


@st.composite
def csv_text(draw: st.DrawFn) -> str:
    cols = draw(st.lists(NAMES, min_size=1, max_size=4))
    cells = st.one_of(SCALARS, st.just(""), st.just("nan"), st.just("inf"))
    rows = draw(st.lists(st.lists(cells, min_size=len(cols), max_size=len(cols)),
                         max_size=6))
    return "\n".join(",".join(r) for r in [cols, *rows]) + "\n"


def _check(result: tuple[int, str, str], text: str) -> None:
    code, _, err = result
    assert "Traceback" not in err, (text, err)
    assert code in (0, 2), (code, text, err[-2000:])
    if code == 2:
        assert err.startswith("storlab: error: ") and err.count("\n") == 1, (text, err)


# storlab_main (the real entry point, in this process) reads its output from pytest's capsys,
# which each call empties: safe to share between examples.
CASES = settings(max_examples=25, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow,
                                        HealthCheck.function_scoped_fixture])


@CASES
@given(space_text())
def test_any_space_file(storlab_main: Any, text: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "space.yaml"
        p.write_text(text)
        _check(storlab_main("design", str(p), "-o", str(Path(d) / "d.csv")), text)


@CASES
@given(campaign_text())
def test_any_campaign_file(storlab_main: Any, text: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "space.yaml").write_text("factors:\n  - {name: a, values: [1, 2]}\n")
        p = Path(d) / "c.yaml"
        p.write_text(text)
        _check(storlab_main("status", str(p)), text)
        assert sorted(os.listdir(d)) == ["c.yaml", "space.yaml"], text  # status writes nothing


@CASES
@given(csv_text(), st.sampled_from(["analyze", "importance"]))
def test_any_csv_table(storlab_main: Any, text: str, command: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "r.csv"
        p.write_text(text)
        first = text.split("\n", 1)[0].split(",")[-1] or "y"
        _check(storlab_main(command, str(p), "-y", first), text)


def _laughs(width: int, depth: int) -> tuple[str, int]:
    """A chain of anchors, each level a list of `width` aliases of the one before (the
    "billion laughs"), and how many nodes the document stands for expanded."""
    lines, size, total = [f"l0: &l0 [{', '.join(['lol'] * width)}]"], 1 + width, 1
    total += 1 + size
    for i in range(1, depth):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
        size = 1 + width * size
        total += 1 + size
    return "\n".join(lines) + "\n", total


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(1, 12), st.integers(1, 12))
def test_yaml_aliases_are_bounded_by_what_they_expand_to(width: int, depth: int) -> None:
    """A document is refused exactly when, its aliases expanded, it stands for more than
    MAX_YAML_NODES nodes (then every later walk of it stays bounded); otherwise it reads
    as YAML says."""
    from storlab.errors import StorlabError
    from storlab.fileio import MAX_YAML_NODES, read_yaml

    text, total = _laughs(width, depth)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "c.yaml"
        p.write_text(text)
        if total > MAX_YAML_NODES:
            try:
                read_yaml(p)
            except StorlabError as exc:
                assert "aliases" in str(exc) and "\n" not in str(exc)
            else:
                raise AssertionError(f"{width}x{depth} ({total} nodes) was read")
            return
        data = read_yaml(p)
    node = data[f"l{depth - 1}"]
    for _ in range(depth - 1):
        assert len(node) == width
        node = node[0]
    assert node == ["lol"] * width
