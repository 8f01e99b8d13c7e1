"""Plain Python values from numpy and pandas ones, for JSON output and the store."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def plain(v: Any) -> Any:
    """A numpy scalar as the matching Python scalar; anything else unchanged."""
    return v.item() if isinstance(v, np.generic) else v


def to_jsonable(obj: Any) -> Any:
    """Numbers, arrays, frames and NaN made JSON-safe (NaN and inf become null)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, pd.DataFrame):
        return [to_jsonable(r) for r in obj.to_dict("records")]
    if isinstance(obj, pd.Series):
        return to_jsonable(obj.to_dict())
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    obj = plain(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
