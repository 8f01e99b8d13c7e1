"""Parameter spaces: factors (categorical, ordinal, integer, real), constraints, responses.

A `Space` knows, for every factor, its values, its two-level low/high, its center
(numeric factors) and how to map coded values (-1/0/+1, or [0, 1) for sampling designs)
to natural values. Spaces load from YAML:

    factors:
      - {name: bs, kind: ordinal, values: [4k, 64k, 1m], unit: B}
      - {name: iodepth, kind: integer, range: [1, 128], log: true, low: 1, high: 64}
      - {name: engine, kind: categorical, values: [psync, libaio]}
    constraints:
      - iodepth == 1 or engine != "psync"
    responses:
      - {name: iops, unit: ops/s, goal: maximize}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from .constraints import Constraint
from .errors import SpaceError, StorlabError
from .jsonutil import plain
from .limits import MAX_LEVELS
from .units import to_number

Kind = Literal["categorical", "ordinal", "integer", "real"]
KINDS: tuple[str, ...] = ("categorical", "ordinal", "integer", "real")
Goal = Literal["maximize", "minimize"]

#: The old name of `storlab.units.to_number` (a number, or a size string as its bytes).
parse_size = to_number


def value_kind(f: Factor) -> str:
    """What a factor's values are for constraint type checks: number (integer and real
    factors, or levels that are all numbers), string, boolean, or any (mixed levels)."""
    if f.numeric:
        return "number"
    vals = list(f.values or [])
    if vals and all(isinstance(v, bool) for v in vals):
        return "boolean"
    if vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return "number"
    if vals and all(isinstance(v, str) for v in vals):
        return "string"
    return "any"


def _letters(k: int) -> list[str]:
    """Textbook factor labels A, B, C, ... skipping I (it reads as the identity); F26... beyond."""
    base = [c for c in "ABCDEFGHJKLMNOPQRSTUVWXYZ"]
    return [base[i] if i < len(base) else f"F{i + 1}" for i in range(k)]


@dataclass
class Factor:
    """One parameter of the system under study."""

    name: str
    kind: Kind
    values: list[Any] | None = None
    range: tuple[float, float] | None = None
    log: bool = False
    low: Any = None
    high: Any = None
    center: Any = None
    unit: str = ""
    description: str = ""
    default: Any = None  # the system's own setting (the baseline a tuner must beat)

    # ------------------------------------------------------------------ basics
    @property
    def numeric(self) -> bool:
        return self.kind in ("integer", "real")

    @property
    def levels(self) -> list[Any] | None:
        """The finite list of values, or None for a continuous (or very wide integer) range."""
        if self.values is not None:
            return list(self.values)
        if self.kind == "integer" and self.range is not None:
            lo, hi = int(self.range[0]), int(self.range[1])
            if hi - lo < 4096 and not self.log:
                return list(range(lo, hi + 1))
        return None

    def contains(self, value: Any) -> bool:
        """Whether `value` is a legal value of this factor."""
        if self.values is not None:
            return any(_same(value, v) for v in self.values)
        try:
            x = to_number(value)
        except ValueError:
            return False
        lo, hi = self.range  # type: ignore[misc]
        if self.kind == "integer" and x != int(x):
            return False
        return lo <= x <= hi

    # ------------------------------------------------------------------ coding
    def from_coded(self, coded: np.ndarray) -> np.ndarray:
        """Natural values for coded -1 (low), +1 (high) and, for numeric factors, 0 (center).

        Numeric factors map any coded value linearly between low and high (in log space
        when `log`); others accept only -1/+1.
        """
        c = np.asarray(coded, dtype=float)
        if self.numeric:
            lo, hi = float(self.low), float(self.high)
            t = (c + 1.0) / 2.0
            if self.log:
                x = np.exp(np.log(lo) + t * (np.log(hi) - np.log(lo)))
            else:
                x = lo + t * (hi - lo)
            x = np.where(c == 0, float(self.center), x)
            return np.round(x).astype(np.int64) if self.kind == "integer" else x
        out = np.empty(c.shape, dtype=object)
        out[c < 0] = self.low
        out[c > 0] = self.high
        if np.any(c == 0):
            raise SpaceError(f"factor {self.name!r} ({self.kind}) has no center level", None,
                             self.name)
        return out

    def to_coded(self, natural: Sequence[Any] | np.ndarray | pd.Series) -> np.ndarray:
        """Coded values (-1 low, +1 high, linear between for numeric factors; NaN elsewhere)."""
        vals = list(natural)
        if self.numeric:
            x = np.array([to_number(v) for v in vals], dtype=float)
            lo, hi = float(self.low), float(self.high)
            if self.log:
                x, lo, hi = np.log(x), math.log(lo), math.log(hi)
            if hi == lo:
                return np.zeros(len(x))
            return 2.0 * (x - lo) / (hi - lo) - 1.0
        out = np.full(len(vals), np.nan)
        for i, v in enumerate(vals):
            if _same(v, self.low):
                out[i] = -1.0
            elif _same(v, self.high):
                out[i] = 1.0
        return out

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        """Natural values for points in [0, 1): the sampling designs' coordinate."""
        u = np.clip(np.asarray(u, dtype=float), 0.0, np.nextafter(1.0, 0.0))
        levels = self.levels
        if levels is not None:
            idx = np.floor(u * len(levels)).astype(int)
            return self.level_values(idx)
        lo, hi = self.range  # type: ignore[misc]
        if self.log:
            x = np.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
        else:
            x = lo + u * (hi - lo)
        if self.kind == "integer":
            return np.clip(np.floor(x), lo, hi).astype(np.int64)
        return x

    def level_values(self, idx: np.ndarray) -> np.ndarray:
        """Values of `levels` at integer positions, with a natural dtype (int, float, object)."""
        levels = self.levels
        assert levels is not None
        if self.numeric:
            arr = np.asarray([to_number(v) for v in levels], dtype=float)
            if self.kind == "integer":
                arr = arr.astype(np.int64)
            return arr[idx]
        return np.asarray(levels, dtype=object)[idx]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.values is not None:
            d["values"] = list(self.values)
        if self.range is not None:
            d["range"] = list(self.range)
        if self.log:
            d["log"] = True
        d["low"], d["high"] = plain(self.low), plain(self.high)
        if self.center is not None:
            d["center"] = plain(self.center)
        if self.unit:
            d["unit"] = self.unit
        if self.description:
            d["description"] = self.description
        if self.default is not None:
            d["default"] = plain(self.default)
        return d


@dataclass
class Response:
    """A measured quantity and which direction is better."""

    name: str
    unit: str = ""
    goal: Goal = "maximize"


@dataclass
class Space:
    """Ordered factors, the constraints between them, and the responses measured."""

    factors: list[Factor]
    constraints: list[Constraint] = field(default_factory=list)
    responses: list[Response] = field(default_factory=list)
    name: str = ""
    labels: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        names = [f.name for f in self.factors]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SpaceError(f"duplicate factor name(s) {dup}", self.name or None, "factors")
        if not self.labels:
            self.labels = _letters(len(self.factors))

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.factors]

    @property
    def k(self) -> int:
        return len(self.factors)

    def __getitem__(self, name: str) -> Factor:
        for f in self.factors:
            if f.name == name:
                return f
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return any(f.name == name for f in self.factors)

    def response(self, name: str) -> Response:
        for r in self.responses:
            if r.name == name:
                return r
        return Response(name)

    def feasible(self, table: pd.DataFrame | Mapping[str, Any]) -> np.ndarray:
        """Boolean mask of rows that satisfy every constraint."""
        n = len(table) if isinstance(table, pd.DataFrame) else len(next(iter(table.values())))
        ok = np.ones(n, dtype=bool)
        for c in self.constraints:
            ok &= c.mask(table)
        return ok

    def validate(self, config: Mapping[str, Any]) -> None:
        """Raise SpaceError unless `config` gives every factor a legal value and is feasible."""
        for f in self.factors:
            if f.name not in config:
                raise SpaceError(f"configuration lacks factor {f.name!r}", None, f.name)
            if not f.contains(config[f.name]):
                raise SpaceError(f"value {config[f.name]!r} is outside the factor's values",
                                 None, f.name)
        for c in self.constraints:
            if not c(config):
                raise SpaceError(f"configuration {dict(config)} violates {c.text!r}", None,
                                 "constraints")

    def defaults(self) -> dict[str, Any] | None:
        """The default configuration, when every factor declares its `default`."""
        if any(f.default is None for f in self.factors):
            return None
        return {f.name: f.default for f in self.factors}

    def subspace(self, names: Iterable[str]) -> Space:
        """The space restricted to `names` (constraints that name only those factors kept)."""
        keep = list(names)
        facs = [self[n] for n in keep]
        cons = [c for c in self.constraints if set(c.names) <= set(keep)]
        return Space(facs, cons, list(self.responses), self.name)

    # ------------------------------------------------------------------ construction
    @classmethod
    def two_level(cls, k: int) -> Space:
        """k two-level factors at -1/+1 named A, B, C, ... (skipping I), for quick look-ups."""
        if k < 1:
            raise SpaceError("need at least one factor", None, "--factors")
        names = _letters(k)
        return cls([Factor(n, "real", range=(-1.0, 1.0), low=-1.0, high=1.0, center=0.0)
                    for n in names], name=f"{k} two-level factors")

    @classmethod
    def from_yaml(cls, path: str | Path, content: bytes | None = None) -> Space:
        """Load a space from a YAML file; errors name the file, the factor and the problem.
        `content`: the file's bytes already read (`path` then only names it)."""
        from .fileio import read_yaml

        p = Path(path)
        try:
            data = read_yaml(p, data=content)
        except StorlabError as exc:  # missing, a directory, binary, bad YAML: one line
            raise SpaceError(str(exc)) from None
        if isinstance(data, dict) and "space" in data and "factors" not in data:
            data = data["space"]
        return cls.from_dict(data, source=str(p))

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> Space:
        if not isinstance(data, dict) or "factors" not in data:
            raise SpaceError("expected a mapping with a 'factors' list", source)
        raw = data["factors"]
        if isinstance(raw, dict):  # {name: spec} form
            raw = [{"name": k, **(v or {})} for k, v in raw.items()]
        if not isinstance(raw, list) or not raw:
            raise SpaceError("'factors' must be a non-empty list", source, "factors")
        factors = [_factor_from_dict(spec, source, i) for i, spec in enumerate(raw)]
        names = {f.name for f in factors}
        cons_raw = data.get("constraints") or []
        if not isinstance(cons_raw, list):
            raise SpaceError("'constraints' must be a list of expressions", source, "constraints")
        types = {f.name: value_kind(f) for f in factors}
        constraints = [Constraint(str(c), names, source, types) for c in cons_raw]
        responses = []
        for r in data.get("responses") or []:
            if isinstance(r, str):
                r = {"name": r}
            goal = str(r.get("goal", "maximize")).lower()
            if goal not in ("maximize", "minimize"):
                raise SpaceError(f"goal {goal!r} must be maximize or minimize", source,
                                 f"responses.{r.get('name')}")
            responses.append(Response(str(r["name"]), str(r.get("unit", "")), goal))  # type: ignore[arg-type]
        return cls(factors, constraints, responses, str(data.get("name", "")))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "factors": [f.to_dict() for f in self.factors],
            "constraints": [c.text for c in self.constraints],
            "responses": [{"name": r.name, "unit": r.unit, "goal": r.goal} for r in self.responses],
        }


def _factor_from_dict(spec: Any, source: str | None, index: int) -> Factor:
    if not isinstance(spec, dict) or "name" not in spec:
        raise SpaceError("each factor needs a mapping with a 'name'", source, f"factors[{index}]")
    name = _factor_name(spec["name"], source, index)

    def err(msg: str) -> SpaceError:
        return SpaceError(msg, source, f"factor {name!r}")

    known = {"name", "kind", "values", "range", "log", "low", "high", "center", "unit",
             "description", "levels", "default"}
    extra = sorted(set(spec) - known)
    if extra:
        raise err(f"unknown field(s) {extra}")
    values = spec.get("values", spec.get("levels"))
    rng = spec.get("range")
    if isinstance(values, list) and len(values) > MAX_LEVELS:
        raise err(f"{len(values)} values, more than {MAX_LEVELS} (a factor with that many "
                  "levels is a range: give 'range: [min, max]')")
    for label, items in (("values", values), ("range", rng)):
        for v in items if isinstance(items, list) else ():
            if isinstance(v, float) and not math.isfinite(v):
                raise err(f"'{label}' holds {v}, not a finite number")
            if isinstance(v, str) and "\0" in v:
                raise err(f"'{label}' holds a NUL byte, which no program argument can carry")
            if isinstance(v, (list, dict)):
                raise err(f"'{label}' holds {v!r}: a value is a number or a word, not a "
                          "list or mapping")
    kind = spec.get("kind")
    if kind is None:  # infer: a range means numeric, numbers mean ordinal, else categorical
        if rng is not None:
            kind = "integer" if all(isinstance(x, int) for x in rng) else "real"
        elif values is not None and all(_is_number(v) for v in values):
            kind = "ordinal"
        else:
            kind = "categorical"
    if kind not in KINDS:
        raise err(f"kind {kind!r} must be one of {', '.join(KINDS)}")
    log = bool(spec.get("log", False))
    if values is not None:
        if not isinstance(values, list) or len(values) < 2:
            raise err("'values' must be a list of at least two values")
        if len({repr(v) for v in values}) != len(values):
            raise err("'values' has duplicates")
    if kind in ("categorical", "ordinal"):
        if values is None:
            raise err(f"{_article(kind)} {kind} factor needs 'values'")
        if rng is not None:
            raise err(f"{_article(kind)} {kind} factor takes 'values', not 'range'")
    else:
        if values is None and rng is None:
            raise err(f"{_article(kind)} {kind} factor needs 'range: [min, max]' or 'values'")
        if values is not None:
            try:
                nums = [to_number(v) for v in values]
            except ValueError as exc:
                raise err(str(exc)) from None
            if kind == "integer" and any(not x.is_integer() for x in nums):
                raise err("an integer factor has a non-integer value")
            rng = rng or [min(nums), max(nums)]
        if not isinstance(rng, (list, tuple)) or len(rng) != 2:
            raise err("'range' must be [min, max]")
        try:
            lo, hi = (to_number(x) for x in rng)
        except ValueError as exc:
            raise err(str(exc)) from None
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise err(f"range [{rng[0]}, {rng[1]}] is not finite")
        if kind == "integer" and max(abs(lo), abs(hi)) >= 2**63:
            raise err(f"range [{rng[0]}, {rng[1]}] is beyond a 64-bit integer")
        if not lo < hi:
            raise err(f"range [{rng[0]}, {rng[1]}] must have min < max")
        if log and lo <= 0:
            raise err("a log-scale factor needs a positive range")
        rng = (lo, hi)
    low = spec.get("low", values[0] if values is not None else rng[0])  # type: ignore[index]
    high = spec.get("high", values[-1] if values is not None else rng[1])  # type: ignore[index]
    center = spec.get("center")
    f = Factor(name, kind, values, rng, log, low, high, center, str(spec.get("unit", "")),
               str(spec.get("description", "")))
    if "default" in spec:
        if not f.contains(spec["default"]):
            raise err(f"default {spec['default']!r} is not one of the factor's values")
        f.default = spec["default"]
    if f.numeric:
        try:
            f.low, f.high = _as_kind(to_number(low), kind), _as_kind(to_number(high), kind)
        except ValueError as exc:
            raise err(str(exc)) from None
        if f.low == f.high:
            raise err("low and high must differ")
        if center is None:
            c = (math.sqrt(f.low * f.high) if log and f.low > 0 else (f.low + f.high) / 2)
            f.center = _as_kind(c, kind)
            if kind == "integer":
                f.center = int(round(c))
        else:
            try:
                f.center = _as_kind(to_number(center), kind)
            except ValueError as exc:
                raise err(str(exc)) from None
        for label, v in (("low", f.low), ("high", f.high), ("center", f.center)):
            if not f.contains(v) and values is None:
                raise err(f"{label} {v} is outside the range")
    else:
        if center is not None:
            raise err("only integer and real factors have a center")
        for label, v in (("low", low), ("high", high)):
            if not f.contains(v):
                raise err(f"{label} {v!r} is not one of the values")
        if _same(low, high):
            raise err("low and high must differ")
    return f


#: Names a factor cannot take: the results table's own columns (`fileio.BOOKKEEPING`: a
#: factor `config_id` vanished from the results) and the names steps get from storlab.
RESERVED_NAMES: frozenset[str] = frozenset({"workdir", "campaign_dir", "warmup"})


def reserved_name(name: str) -> bool:
    """Whether a factor cannot take `name` (a bookkeeping column, a step's name, `_...`)."""
    from .fileio import BOOKKEEPING

    return name in BOOKKEEPING or name in RESERVED_NAMES or name.startswith("_")


def _factor_name(raw: Any, source: str | None, index: int) -> str:
    """A factor's name, checked: text, not empty, no control characters, not reserved."""
    where = f"factors[{index}]"
    if not isinstance(raw, (str, int, float)) or isinstance(raw, bool):
        raise SpaceError(f"name {raw!r} must be a word", source, where)
    name = str(raw)
    if not name.strip():
        raise SpaceError("a factor's name cannot be empty", source, where)
    if any(ord(c) < 32 or c == "\x7f" for c in name):
        raise SpaceError(f"name {name!r} holds a control character", source, where)
    if reserved_name(name):
        raise SpaceError(f"name {name!r} is reserved (a column storlab adds to every result, "
                         "or a name it gives the steps); rename the factor", source, where)
    return name


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _as_kind(x: float, kind: str) -> float | int:
    return int(round(x)) if kind == "integer" else float(x)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _same(a: Any, b: Any) -> bool:
    if a is b or a == b:
        return True
    try:
        return to_number(a) == to_number(b)
    except ValueError:
        return str(a) == str(b)
