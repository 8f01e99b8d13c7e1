"""The one grammar for sizes, rates and mixes, used by every input path.

Sizes follow fio's default `kb_base=1024`: a number, optionally a decimal one, then an
optional suffix k/m/g/t/p, with or without a trailing `b` or `ib`, in any case::

    4096 = "4096" = "4k" = "4K" = "4KB" = "4KiB"      1.5M = 1,572,864      512B = 512

`kb_base=1000` (fio's SI mode) makes the SI spellings decimal (`4k` = `4KB` = 4000) while
the IEC spellings stay binary (`4KiB` = 4096).

One deliberate difference from fio: fio's default mode reads `KiB` as 1000 ("power-of-10
values with IEC prefixes", kept for old job files). storlab reads `KiB` as 1024 in both
modes, as IEC 80000-13 defines it and as a user who writes `KiB` means it.
`fio_value` rewrites such values (and decimals such as `1.5M`, which fio 3.33 reads as 1
byte) for fio, so that fio and storlab see the same bytes.

Rates are sizes per second (`100MB/s`, `500k`); size mixes are `4k:0.8,64k:0.2` (or a
mapping); operation mixes are `get:70,put:30` (or a mapping). Errors are `UnitsError`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from numbers import Real
from typing import Any

from .errors import UnitsError

__all__ = ["UnitsError", "to_number", "parse_size", "parse_rate", "parse_size_mix",
           "parse_op_mix", "format_size", "fio_value"]

_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)
_RATE_RE = re.compile(r"^(.*?)\s*(?:/\s*s(?:ec)?)?\s*$", re.IGNORECASE)


def _check_base(kb_base: int) -> None:
    if kb_base not in (1000, 1024):
        raise UnitsError(f"kb_base {kb_base!r} must be 1000 or 1024")


def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def to_number(value: Any, kb_base: int = 1024) -> float:
    """A number as itself, or a size string as its bytes (a factor level such as `4k` in a
    numeric comparison). Any number passes, negative and fractional ones too."""
    if _is_number(value):
        return float(value)
    if isinstance(value, bool) or value is None:
        raise UnitsError(f"{value!r} is not a number or size")
    _check_base(kb_base)
    m = _SIZE_RE.match(str(value))
    if not m:
        raise UnitsError(f"{value!r} is not a number or size such as 4096, 4k or 1.5MiB")
    num, prefix, tail = m.groups()
    tail = tail.lower()
    if tail == "i":  # "4Ki" is not a unit anyone writes; refuse rather than guess
        raise UnitsError(f"{value!r} is not a number or size such as 4096, 4k or 1.5MiB")
    if tail == "ib" and not prefix:  # "4ib"
        raise UnitsError(f"{value!r} is not a number or size such as 4096, 4k or 1.5MiB")
    mult = 1024 if tail == "ib" else kb_base
    return float(num) * mult ** _POWERS[prefix.lower()]


def parse_size(value: Any, what: str = "size", allow_zero: bool = False,
               kb_base: int = 1024) -> int:
    """Whole bytes from 4096, "4k", "4KB", "4KiB", "1.5M" (see the module's grammar).

    A suffixed decimal rounds to the nearest byte (`1.1k` = 1126); a bare number must be
    whole. Zero is refused unless `allow_zero`; negative sizes always are."""
    _check_base(kb_base)
    try:
        x = to_number(value, kb_base)
    except UnitsError:
        raise UnitsError(f"{what} {value!r} is not a size such as 4096, 4k or 1.5MiB") from None
    if not math.isfinite(x):
        raise UnitsError(f"{what} {value!r} is not a finite size")
    m = None if _is_number(value) else _SIZE_RE.match(str(value))
    if (m is None or not m.group(2)) and x != int(x):
        raise UnitsError(f"{what} {value!r} must be a whole number of bytes")
    out = int(round(x))
    if out < 0 or (out == 0 and not allow_zero):
        raise UnitsError(f"{what} {value!r} must be {'>= 0' if allow_zero else '> 0'} bytes")
    return out


def parse_rate(value: Any, what: str = "rate", kb_base: int = 1024) -> float:
    """Bytes per second from 1048576, "500k", "100MB/s", "1.5GiB/sec" (sizes per second)."""
    if _is_number(value):
        return float(parse_size(value, what, allow_zero=True, kb_base=kb_base))
    m = _RATE_RE.match(str(value))
    try:
        return float(to_number(m.group(1) if m else value, kb_base))
    except UnitsError:
        raise UnitsError(f"{what} {value!r} is not a rate such as 100MB/s") from None


def _items(spec: Any, what: str) -> list[tuple[Any, Any]]:
    """(key, weight) pairs from a mapping, "a:1,b:2", or a single key (weight 1)."""
    if isinstance(spec, Mapping):
        return list(spec.items())
    if isinstance(spec, str):
        out = []
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            key, _, w = part.partition(":")
            out.append((key.strip(), w.strip() if w else "1"))
        return out
    if isinstance(spec, Iterable) and not isinstance(spec, (bytes, bytearray)):
        raise UnitsError(f"{what} {spec!r} must be a mapping or text like 4k:0.8,64k:0.2")
    return [(spec, 1.0)]


def _weight(w: Any, key: Any, what: str) -> float:
    try:
        x = float(w)
    except (TypeError, ValueError):
        raise UnitsError(f"{what}: weight {w!r} of {key} is not a number") from None
    if not math.isfinite(x) or x < 0:
        raise UnitsError(f"{what}: weight {w!r} of {key} must be a number >= 0")
    return x


def parse_size_mix(spec: Any, what: str = "size mix", exact: bool = False,
                   kb_base: int = 1024) -> dict[int, float]:
    """A distribution over sizes as {bytes: share}: "16k:0.8,1MiB:0.2", {"16k": 4, ...},
    or one size (share 1).

    By default the weights are normalised and a size written twice adds up. With `exact`
    the shares are proportions: they must sum to 1 and each size may appear once."""
    items = _items(spec, what)
    if not items:
        raise UnitsError(f"{what} {spec!r} is empty; write it as 4k:0.8,64k:0.2")
    out: dict[int, float] = {}
    for key, w in items:
        b = parse_size(key, f"{what}: size", kb_base=kb_base)
        x = _weight(w, key, what)
        if exact and b in out:
            raise UnitsError(f"{what}: size {format_size(b)} appears twice in {spec!r}")
        out[b] = out.get(b, 0.0) + x
    total = sum(out.values())
    if exact:
        if abs(total - 1.0) > 1e-6:
            raise UnitsError(f"{what}: shares sum to {total:g}, not 1 ({spec!r})")
        return out
    if total <= 0:
        raise UnitsError(f"{what} {spec!r} has no weight")
    return {k: w / total for k, w in out.items()}


def parse_op_mix(spec: Any, ops: Iterable[str], what: str = "operation mix"
                 ) -> dict[str, float]:
    """Normalised weights over named operations from {get: 70, put: 30} or "get:70,put:30";
    every name in `ops` is in the result (0 when not given)."""
    ops = tuple(ops)
    if not isinstance(spec, (str, Mapping)):
        raise UnitsError(f"{what} {spec!r} must map {'/'.join(ops)} to weights")
    mix: dict[str, float] = {}
    for key, w in _items(spec, what):
        name = str(key).strip().lower()
        if name not in ops:
            raise UnitsError(f"{what} {spec!r}: operations are {', '.join(ops)} "
                             "with non-negative weights")
        mix[name] = mix.get(name, 0.0) + _weight(w, name, what)
    total = sum(mix.values())
    if total <= 0:
        raise UnitsError(f"{what} {spec!r} has no weight")
    return {k: mix.get(k, 0.0) / total for k in ops}


def format_size(nbytes: int) -> str:
    """4096 -> '4k', 1048576 -> '1m', 512 -> '512' (fio's binary suffixes; round-trips)."""
    for suffix, mult in (("g", 1024**3), ("m", 1024**2), ("k", 1024)):
        if nbytes >= mult and nbytes % mult == 0:
            return f"{nbytes // mult}{suffix}"
    return str(nbytes)


def fio_value(value: str) -> str:
    """A value as fio must read it to mean what storlab reads. fio 3.33 takes "4KiB" as 4000
    bytes (its default mode) and "1.5M" as 1 byte (it stops at the dot); such sizes become
    their bytes. Everything else (`4k`, `randread`, `4k/50:64k/50`) stays as it is."""
    m = _SIZE_RE.match(value)
    if m and m.group(2) and (m.group(3).lower() == "ib" or "." in m.group(1)):
        return str(parse_size(value))
    return value
