"""What of a campaign may reach root's `ceph config get/set` argv: a value in the form
its option's type in Ceph's schema allows, a `who` that is one of Ceph's sections (with
its masks), an option name that is a plain name. The `ceph` CLI takes any word starting
with `-` as its own option (`--log_file=/root/x` writes that file as root, `--conf=...`
names another monitor), so a word starting with `-` never passes, except a negative number
for a signed type; the runner also ends the CLI's options with `--` before these words.

The grammars follow Ceph's own parsers (`Option::parse_value`): `strict_si_cast` for
int/uint, `strict_strtod` for float, `strict_strtob` (true/false in any case, or an
integer) for bool, `strict_iec_cast` for size (B, K..E with an optional `i` or `B`),
`parse_timespan` for secs (a number with an optional unit, a sequence of them), a plain
count for millisecs. Stricter than Ceph where it is cheap (no SI suffix on an int)."""

from __future__ import annotations

import re
from collections.abc import Sequence

_INT = re.compile(r"[+-]?[0-9]+")
_UINT = re.compile(r"\+?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_BOOL = re.compile(r"true|false|[0-9]+", re.IGNORECASE)
_SIZE = re.compile(r"\+?[0-9]+(?:B|[KMGTPE][iB]?)?")
_SPAN_UNITS = ("s|sec|secs|second|seconds|m|min|mins|minute|minutes|h|hr|hrs|hour|hours|"
               "d|day|days|w|wk|wks|week|weeks|mo|month|months|y|yr|yrs|year|years")
_SECS = re.compile(rf"[0-9]+(?: ?(?:{_SPAN_UNITS}))?(?: ?[0-9]+ ?(?:{_SPAN_UNITS}))*")
_MILLISECS = re.compile(r"[0-9]+")
GRAMMARS: dict[str, tuple[re.Pattern[str], str]] = {
    "int": (_INT, "an integer"),
    "uint": (_UINT, "a non-negative integer"),
    "float": (_FLOAT, "a decimal number"),
    "bool": (_BOOL, "true, false or an integer"),
    "size": (_SIZE, "a byte count with an optional K/M/G/T/P/E suffix (Ki, KB, ...)"),
    "secs": (_SECS, "seconds, with an optional unit (30, 5m, 1h 30m)"),
    "millisecs": (_MILLISECS, "a count of milliseconds"),
}

#: `who` of `ceph config set`: a section (`global`, a daemon type, `<type>.<id>`), then
#: optional masks (`osd/host:node1`, `osd/class:ssd`), as Ceph's configuration guide has.
_ID = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"  # a host name has dashes, never first
_MASK = rf"/[a-z_]+:{_ID}"
WHO = re.compile(rf"(?:global|(?:mon|mgr|osd|mds|client)(?:\.{_ID})?)(?:{_MASK})*")
#: a Ceph option name (`osd_op_num_shards`); Ceph also reads spaces, storlab's factors do not.
OPTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_]*")


def refused_value(kind: str, enum_values: Sequence[str], value: str) -> str | None:
    """Why `value` (as it would be passed) may not be set on an option of Ceph type
    `kind` (with `enum_values` for a `str`), or None. A type outside Ceph's data types
    (`str` without enum, `addr`, `uuid`) takes any text that is not a CLI option."""
    if kind in GRAMMARS:
        pattern, what = GRAMMARS[kind]
        if pattern.fullmatch(value):
            return None
        return f"level {value!r} is not {what}, the form Ceph's type {kind} takes"
    if kind == "str" and enum_values:
        if value in enum_values and not value.startswith("-"):
            return None
        return f"level {value!r} is not one of Ceph's values for it ({', '.join(enum_values)})"
    if value.startswith("-") or "\n" in value or "\0" in value:
        return f"level {value!r} starts with '-' or holds a line break (read as a ceph CLI option)"
    return None


def refused_who(who: str) -> str | None:
    """Why `who` is not one of Ceph's configuration sections with masks, or None."""
    if WHO.fullmatch(who):
        return None
    return (f"who {who!r} is not a Ceph configuration section (global, mon, mgr, osd, mds, "
            "client, <type>.<id>, optionally with masks such as osd/host:NAME or osd/class:ssd)")
