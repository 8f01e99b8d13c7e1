"""The size-mix rules: how the per-size throughputs T^{S_i} of the f_rw model combine for a
stream of sizes S_i in I/O-count proportions P_i (issue 13).

    harmonic (the default): 1 / T_total = sum_i P_i / T_total^{S_i}
    slides (the seed's formula): T_total = 100 * sum_i P_i * k^{S_i}

`harmonic` applies the model's own cost argument to sizes: every I/O takes 1/T^{S_i} of the
shared capacity. The slides' formula averages the per-size throughputs, which holds only
when the sizes do not share the bottleneck; on one device it over-predicts a 4k/64k mix
2.6-2.9x, so it stays available by name only."""

from __future__ import annotations

import numpy as np

from ..errors import EstimateError

MIXES: tuple[str, ...] = ("harmonic", "slides")
#: The mixing rule measurements support (issue 13); `slides` is the seed's formula.
DEFAULT_MIX = "harmonic"


def check_mix(mix: str) -> str:
    """A known mix rule's name; a clear error otherwise."""
    if mix not in MIXES:
        raise EstimateError(f"mix rule {mix!r} is not one of {', '.join(MIXES)}")
    return mix


def per_size_rates(ks: np.ndarray, props: np.ndarray, mix: str) -> np.ndarray:
    """Each size's I/O rate (IOPS) in the mixed stream, from its k (the slides' IOPS per
    read-percentage point) and its proportion P_i."""
    if mix == "slides":
        return 100.0 * props * ks  # size i's I/O rate as the slides' sum has it
    # each size's I/O costs 1/T_i of the capacity; a P-weighted stream of them
    # runs at 1 / sum(P_i / T_i), split among sizes in the proportions P_i
    t_i = 100.0 * ks
    total = 1.0 / np.sum(props / t_i)
    return total * props
