"""The runner seam: one configuration in, one `RunResult` out. Kept as small as Optuna's
sampler interface so that fio, any command, postmark, sysbench and the simulator fit it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass
class RunResult:
    """What one run produced. `metrics` are flat numbers (the response columns);
    `raw` is the program's whole output (fio JSON kept as is); `rows` holds extra
    per-host or per-operation rows when a run has them (fio client/server)."""

    status: str  # "ok" | "failed" | "timeout"
    metrics: dict[str, float] = field(default_factory=dict)
    raw: str = ""
    stderr: str = ""
    exit_code: int | None = None
    started: float = 0.0
    ended: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def failure_lines(stderr: str | None, n: int = 3) -> list[str]:
    """What a failed run's stderr tail says, for a person: the program's own last `n`
    non-empty lines (fio's "engine nosuchengine not loadable"), then storlab's diagnosis
    lines ("storlab: no fio JSON document in the output"), which runners append last and
    would otherwise push the program's words out of a one-line summary."""
    lines = [ln.rstrip() for ln in (stderr or "").splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.startswith("storlab: ")]
    theirs = [ln for ln in lines if not ln.startswith("storlab: ")]
    return theirs[-n:] + ours[-2:]


def option_bool(name: str, value: Any) -> bool:
    """A runner option that gates safety (`allow_destructive`, `shell`), taken only as a
    real YAML bool: `bool("false")` is True, so a quoted "false" or "no" would open it."""
    if isinstance(value, bool):
        return value
    from ..spec import CampaignError

    raise CampaignError(f"option {name}: {value!r} must be true or false")


class Runner(Protocol):
    """Runs one configuration. `workdir` is a scratch directory owned by this run."""

    name: str

    def run(self, config: Mapping[str, Any], workdir: Path, timeout: float | None = None
            ) -> RunResult: ...


#: How much of a program's output the search for its JSON document may decode in all, as
#: a multiple of the output's length (plus a constant): each failed attempt costs the
#: bytes up to where it failed, and nested lines that each start a document would make
#: the search quadratic.
_JSON_BUDGET = 4
_LINE_START = re.compile(r"^[ \t]*[\[{]", re.MULTILINE)
#: A JSON string closed within the text (escapes skipped): an error placed at its opening
#: quote is the text's own, not the window's cut.
_CLOSED_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _maybe_cut(part: str, pos: int) -> bool:
    """Whether decoding the window `part`, failed at `pos`, may have failed only because
    the window cut the value: it failed in the window's second half (a value cut on the
    way), or at a string the window leaves open (the decoder places an unterminated
    string at its opening quote, however far the cut). Read from the position, never
    the message's wording; an error early in the window elsewhere (`{` then junk, a
    closed string where a `:` belongs) is the text's own: no wider window."""
    return pos >= len(part) // 2 or (part.startswith('"', pos)
                                     and not _CLOSED_STRING.match(part, pos))


def find_json(text: str, accept: Callable[[Any], bool] = lambda doc: True,
              objects_only: bool = False) -> Any:
    """The first JSON value in `text` that starts a line (programs print banners and
    warnings too) and that `accept` takes. Bounded: each attempt decodes a window of the
    text from its line (widened 4x while the attempt may have failed at the window's cut,
    see `_maybe_cut`: a JSONDecodeError counts the lines from the start of what it is
    given, which on the whole text made a failed attempt cost the whole prefix), and the
    decoding tried costs at most `_JSON_BUDGET` times the output's length (plus 1 MiB);
    past that, or for a value too deeply nested to decode, ValueError in one line, never
    a traceback or a stall."""
    dec = json.JSONDecoder()
    budget = _JSON_BUDGET * len(text) + (1 << 20)
    for mt in _LINE_START.finditer(text):
        i = mt.end() - 1
        if objects_only and text[i] != "{":
            continue
        w = 1 << 8
        budget -= 64  # an attempt's own cost, however short
        while True:
            part = text[i:i + w]
            try:
                doc, _ = dec.raw_decode(part)
            except json.JSONDecodeError as exc:
                budget -= exc.pos + 1
                if i + w < len(text) and _maybe_cut(part, exc.pos):
                    budget -= w
                    w *= 4  # cut by the window, maybe: try a wider one
                    if budget >= 0:
                        continue
            except RecursionError:
                budget -= 1 << 12  # nested past what the decoder holds: not a document
            else:
                budget -= len(part)
                if accept(doc):
                    return doc
            break
        if budget < 0:
            raise ValueError("the output is too malformed to find its JSON document in "
                             f"(gave up at byte {i} of {len(text)})")
    raise ValueError("no JSON document in the output")
