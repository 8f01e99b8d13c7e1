"""Plain Python values from numpy and pandas ones, for JSON output and the store.

numpy and pandas are not imported here: a value can only be a numpy or pandas object if
its library is already loaded, so the checks look them up in `sys.modules` (this keeps
`storlab --help` from loading pandas)."""

from __future__ import annotations

import math
import sys
from typing import Any


def plain(v: Any) -> Any:
    """A numpy scalar as the matching Python scalar; anything else unchanged."""
    np = sys.modules.get("numpy")
    return v.item() if np is not None and isinstance(v, np.generic) else v


def to_jsonable(obj: Any) -> Any:
    """Numbers, arrays, frames and NaN made JSON-safe (NaN and inf become null)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    pd = sys.modules.get("pandas")
    if pd is not None:
        if isinstance(obj, pd.DataFrame):
            return [to_jsonable(r) for r in obj.to_dict("records")]
        if isinstance(obj, pd.Series):
            return to_jsonable(obj.to_dict())
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    obj = plain(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
