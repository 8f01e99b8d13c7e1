"""Constraint expressions over factor names, parsed with a whitelist and evaluated vectorised.

`inode_size <= block_size`, `not (journal == "none" and barrier == 1)`,
`numjobs * iodepth <= 256`, `engine in ("libaio", "io_uring")`.
Python's own parser reads the text; only the node types below are accepted, so nothing
is ever executed: names resolve to columns, literals to constants.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from .errors import SpaceError
from .units import to_number

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMPOPS = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_ALLOWED = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd,
    ast.BinOp, ast.Compare, ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.List, ast.In,
    ast.NotIn, *_BINOPS, *_CMPOPS,
)


#: Bounds that keep a constraint cheap to check whatever its text: length of the text,
#: nesting depth, number of nodes, elements of a literal list.
MAX_CHARS = 4000
MAX_DEPTH = 60
MAX_NODES = 500
MAX_LIST = 1000
#: Kinds of values an expression can have (the factors' kinds map onto them).
NUM, STR, BOOL, LIST, ANY = "number", "string", "boolean", "list", "any"


class Constraint:
    """A boolean expression over factor names; `mask(table)` says which rows satisfy it.

    `types` maps factor names to the kind of their values (`number`, `string`, `boolean`,
    `any`): comparisons are type-checked against them when the constraint is read. Numbers
    are computed as 64-bit floats (no unbounded integers: `9**9**9` is refused as an
    overflow, not computed), strings and lists only compared, never built.
    """

    def __init__(self, text: str, names: set[str] | None = None, source: str | None = None,
                 types: Mapping[str, str] | None = None):
        self.text = str(text).strip()
        self._source = source
        if len(self.text) > MAX_CHARS:
            raise self._error(f"is longer than {MAX_CHARS} characters")
        try:
            tree = ast.parse(self.text, mode="eval")
        except SyntaxError as exc:
            raise SpaceError(f"constraint {self._shown} is not a valid expression ({exc.msg})",
                             source, "constraints") from None
        except (RecursionError, MemoryError, ValueError) as exc:
            raise self._error(f"cannot be read ({type(exc).__name__}: too deep or too large)"
                              ) from None
        nodes = list(ast.walk(tree))
        if len(nodes) > MAX_NODES:
            raise self._error(f"has more than {MAX_NODES} parts")
        if _depth(tree) > MAX_DEPTH:
            raise self._error(f"is nested more than {MAX_DEPTH} levels deep")
        for node in nodes:
            if not isinstance(node, _ALLOWED):
                raise SpaceError(
                    f"constraint {self._shown} uses {type(node).__name__}, which is not allowed "
                    "(only comparisons, and/or/not, arithmetic, in, names and literals)",
                    source, "constraints")
        self.names = sorted({n.id for n in nodes if isinstance(n, ast.Name)})
        if names is not None:
            unknown = [n for n in self.names if n not in names]
            if unknown:
                raise SpaceError(f"constraint {self._shown} names unknown factor(s) {unknown}",
                                 source, "constraints")
        self.types = {n: (types or {}).get(n, ANY) for n in self.names}
        self._tree = tree.body
        kind, _ = self._check(self._tree)
        if not self._truthy(self._tree, kind):
            raise self._error(f"is a {kind}, not a condition (write a comparison such as "
                              "`a <= b`)")

    def _error(self, what: str) -> SpaceError:
        return SpaceError(f"constraint {self._shown} {what}", self._source, "constraints")

    @property
    def _shown(self) -> str:
        """The text for messages, cut short (a message stays one readable line)."""
        t = self.text if len(self.text) <= 80 else self.text[:60] + " ... " + self.text[-15:]
        return repr(t.replace("\n", " "))

    # ------------------------------------------------------------------ static checks
    def _truthy(self, node: ast.AST, kind: str) -> bool:
        """Whether `node` may stand as a condition: a boolean, or a factor used as a flag."""
        return kind in (BOOL, ANY) or (kind == NUM and isinstance(node, ast.Name))

    def _check(self, node: ast.AST) -> tuple[str, Any]:
        """(kind, constant value or None) of `node`; refuses ill-typed comparisons,
        arithmetic on non-numbers, overflowing or dividing-by-zero constants."""
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                return BOOL, v
            if isinstance(v, (int, float)):
                try:
                    f = float(v)
                except OverflowError:
                    raise self._error(f"has a number beyond ±1.8e308 ({str(v)[:20]}...)"
                                      ) from None
                if not math.isfinite(f):
                    raise self._error("has a number that is not finite")
                return NUM, f
            if isinstance(v, str):
                return STR, v
            raise self._error(f"has the literal {v!r}, which is not a number, a string or "
                              "true/false")
        if isinstance(node, ast.Name):
            return self.types.get(node.id, ANY), None
        if isinstance(node, (ast.Tuple, ast.List)):
            if len(node.elts) > MAX_LIST:
                raise self._error(f"has a list of more than {MAX_LIST} values")
            kinds = set()
            for e in node.elts:
                k, _ = self._check(e)
                if k == LIST:
                    raise self._error("has a list inside a list")
                kinds.add(k)
            return LIST, kinds
        if isinstance(node, ast.UnaryOp):
            k, c = self._check(node.operand)
            if isinstance(node.op, ast.Not):
                if not self._truthy(node.operand, k):
                    raise self._error(f"applies `not` to a {k}")
                return BOOL, None
            if k not in (NUM, BOOL, ANY):
                raise self._error(f"applies a sign to a {k}")
            return NUM, (None if c is None else self._fold(
                operator.neg if isinstance(node.op, ast.USub) else operator.pos, c))
        if isinstance(node, ast.BinOp):
            (kl, cl), (kr, cr) = self._check(node.left), self._check(node.right)
            for k in (kl, kr):
                if k not in (NUM, BOOL, ANY):
                    raise self._error(f"does arithmetic on a {k} (only numbers are computed)")
            if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and cr == 0:
                raise self._error("divides by zero")
            if cl is not None and cr is not None:
                return NUM, self._fold(_BINOPS[type(node.op)], cl, cr)
            return NUM, None
        if isinstance(node, ast.BoolOp):
            for v in node.values:
                k, _ = self._check(v)
                if not self._truthy(v, k):
                    raise self._error(f"combines a {k} with `{type(node.op).__name__.lower()}`"
                                      " (each side must be a condition)")
            return BOOL, None
        if isinstance(node, ast.Compare):
            left = node.left
            kl, cl = self._check(left)
            for op, right in zip(node.ops, node.comparators):
                kr, cr = self._check(right)
                self._check_compare(left, kl, op, right, kr, cr)
                left, kl = right, kr
            return BOOL, None
        raise self._error(f"uses {type(node).__name__}")  # pragma: no cover

    def _check_compare(self, left: ast.AST, kl: str, op: ast.cmpop, right: ast.AST, kr: str,
                       members: Any) -> None:
        if kl == LIST:
            raise self._error("compares a list (a list may only follow `in`)")
        if isinstance(op, (ast.In, ast.NotIn)):
            kinds = set(members) if kr == LIST else {kr}
            for k in kinds:
                if not _compatible(kl, k):
                    raise self._error(f"tests whether {self._what(left, kl)} is in "
                                      f"{_ast_text(right)}, which holds a {k}")
            return
        if kr == LIST:
            raise self._error("compares with a list (use `in`)")
        if not _compatible(kl, kr):
            raise self._error(f"compares {self._what(left, kl)} with "
                              f"{self._what(right, kr)}")
        if not isinstance(op, (ast.Eq, ast.NotEq)) and STR in (kl, kr):
            raise self._error("orders strings (<, <=, >, >= compare numbers only)")

    def _what(self, node: ast.AST, kind: str) -> str:
        if isinstance(node, ast.Name):
            return f"factor {node.id!r} ({kind} values)"
        return f"{_ast_text(node)} (a {kind})"

    def _fold(self, fn: Any, *args: float) -> float:
        with np.errstate(all="ignore"):
            try:
                v = float(fn(*(np.float64(a) for a in args)))
            except (ZeroDivisionError, OverflowError, ArithmeticError):
                v = math.inf
        if not math.isfinite(v):
            raise self._error("computes a constant beyond ±1.8e308 (or not a number)")
        return v

    # ------------------------------------------------------------------ evaluation
    def mask(self, table: Mapping[str, Any] | pd.DataFrame) -> np.ndarray:
        """Boolean array, one entry per row of `table` (a DataFrame or a dict of columns)."""
        try:
            with np.errstate(all="ignore"):  # inf/nan from data compare as false
                out = self._eval(self._tree, table)
            return np.asarray(out, dtype=bool).reshape(-1) if np.ndim(out) else np.full(
                _nrows(table), bool(out))
        except KeyError as exc:
            raise self._error(f"needs column {exc.args[0]!r}, which the table lacks") from None
        except (TypeError, ValueError, ArithmeticError, MemoryError) as exc:
            raise self._error(f"cannot be evaluated on these values ({exc})") from None

    def __call__(self, config: Mapping[str, Any]) -> bool:
        """True when the single configuration `config` satisfies the constraint."""
        return bool(self.mask({k: np.asarray([v], dtype=object) for k, v in config.items()})[0])

    def __repr__(self) -> str:
        return f"Constraint({self.text!r})"

    def _eval(self, node: ast.AST, env: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return np.float64(v)  # 64-bit floats: bounded, never a huge integer
            return v
        if isinstance(node, ast.Name):
            col = np.asarray(env[node.id])
            if self.types.get(node.id) == NUM:
                return _as_numbers(col)
            return _numeric_if_possible(col)
        if isinstance(node, (ast.Tuple, ast.List)):
            return [self._eval(e, env) for e in node.elts]
        if isinstance(node, ast.UnaryOp):
            val = self._eval(node.operand, env)
            if isinstance(node.op, ast.Not):
                return np.logical_not(val)
            val = np.asarray(val, dtype=float)
            return -val if isinstance(node.op, ast.USub) else +val
        if isinstance(node, ast.BinOp):
            left = np.asarray(self._eval(node.left, env), dtype=float)
            right = np.asarray(self._eval(node.right, env), dtype=float)
            return _BINOPS[type(node.op)](left, right)
        if isinstance(node, ast.BoolOp):
            vals = [np.asarray(self._eval(v, env), dtype=bool) for v in node.values]
            combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
            out = vals[0]
            for v in vals[1:]:
                out = combine(out, v)
            return out
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, env)
            result: Any = True
            for op, right_node in zip(node.ops, node.comparators):
                right = self._eval(right_node, env)
                if isinstance(op, (ast.In, ast.NotIn)):
                    options = right if isinstance(right, list) else [right]
                    hit = np.isin(np.asarray(left, dtype=object), np.asarray(options, dtype=object))
                    step = hit if isinstance(op, ast.In) else np.logical_not(hit)
                else:
                    step = _CMPOPS[type(op)](left, right)
                result = np.logical_and(result, step)
                left = right
            return result
        raise SpaceError(f"constraint {self.text!r}: unsupported expression")  # pragma: no cover


def _compatible(a: str, b: str) -> bool:
    if ANY in (a, b) or a == b:
        return True
    return {a, b} == {NUM, BOOL}  # true/false compare as 1/0


def _ast_text(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."


def _depth(tree: ast.AST) -> int:
    """Nesting depth of a tree, without recursion (a deep tree must not blow the stack)."""
    deepest = 0
    todo = [(tree, 1)]
    while todo:
        node, d = todo.pop()
        deepest = max(deepest, d)
        if deepest > MAX_DEPTH:
            return deepest
        todo.extend((c, d + 1) for c in ast.iter_child_nodes(node))
    return deepest


def _as_numbers(arr: np.ndarray) -> np.ndarray:
    """A numeric factor's column as floats (sizes such as "4k" read as bytes)."""
    try:
        return arr.astype(float)
    except (TypeError, ValueError):
        return np.asarray([to_number(v) for v in arr.reshape(-1)], dtype=float)


def _numeric_if_possible(arr: np.ndarray) -> np.ndarray:
    """Object columns of numbers become float so that `a <= b` compares numbers."""
    if arr.dtype != object:
        return arr
    try:
        return arr.astype(float)
    except (TypeError, ValueError):
        return arr


def _nrows(table: Mapping[str, Any] | pd.DataFrame) -> int:
    if isinstance(table, pd.DataFrame):
        return len(table)
    for v in table.values():
        return len(v)
    return 1
