"""Constraint expressions over factor names, parsed with a whitelist and evaluated vectorised.

`inode_size <= block_size`, `not (journal == "none" and barrier == 1)`,
`numjobs * iodepth <= 256`, `engine in ("libaio", "io_uring")`.
Python's own parser reads the text; only the node types below are accepted, so nothing
is ever executed: names resolve to columns, literals to constants.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from .errors import SpaceError

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


class Constraint:
    """A boolean expression over factor names; `mask(table)` says which rows satisfy it."""

    def __init__(self, text: str, names: set[str] | None = None, source: str | None = None):
        self.text = text.strip()
        try:
            tree = ast.parse(self.text, mode="eval")
        except SyntaxError as exc:
            raise SpaceError(f"constraint {self.text!r} is not a valid expression ({exc.msg})",
                             source, "constraints") from None
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED):
                raise SpaceError(
                    f"constraint {self.text!r} uses {type(node).__name__}, which is not allowed "
                    "(only comparisons, and/or/not, arithmetic, in, names and literals)",
                    source, "constraints")
        self.names = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)})
        if names is not None:
            unknown = [n for n in self.names if n not in names]
            if unknown:
                raise SpaceError(f"constraint {self.text!r} names unknown factor(s) {unknown}",
                                 source, "constraints")
        self._tree = tree.body

    def mask(self, table: Mapping[str, Any] | pd.DataFrame) -> np.ndarray:
        """Boolean array, one entry per row of `table` (a DataFrame or a dict of columns)."""
        out = self._eval(self._tree, table)
        return np.asarray(out, dtype=bool).reshape(-1) if np.ndim(out) else np.full(
            _nrows(table), bool(out))

    def __call__(self, config: Mapping[str, Any]) -> bool:
        """True when the single configuration `config` satisfies the constraint."""
        return bool(self.mask({k: np.asarray([v], dtype=object) for k, v in config.items()})[0])

    def __repr__(self) -> str:
        return f"Constraint({self.text!r})"

    def _eval(self, node: ast.AST, env: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            col = env[node.id]
            return _numeric_if_possible(np.asarray(col))
        if isinstance(node, (ast.Tuple, ast.List)):
            return [self._eval(e, env) for e in node.elts]
        if isinstance(node, ast.UnaryOp):
            val = self._eval(node.operand, env)
            if isinstance(node.op, ast.Not):
                return np.logical_not(val)
            return -val if isinstance(node.op, ast.USub) else +val
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](self._eval(node.left, env), self._eval(node.right, env))
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
