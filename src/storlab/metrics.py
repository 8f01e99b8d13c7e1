"""The measurement columns each of storlab's runners writes, declared per runner kind: what
an analysis must never read as a setting (`is_metric`). It sits in a low layer so that the
analyses can ask it without importing the runners; `storlab.campaign.runners` re-exports it,
and a runner's contract test checks that every metric it reports is declared here."""

from __future__ import annotations

import functools
import re
from typing import Iterable

#: The measurement columns each runner writes, as regular expressions matching a whole
#: column name: what an analysis must never read as a setting, whatever its values look like
#: (`is_metric` asks). Declared here rather than in each runner's module so that asking
#: imports no runner: importing all seven costs 0.18 s of CPU even with pandas already
#: loaded (pydantic, the load generator), a fifth of the importance command's 1 s.
METRICS: dict[str, tuple[str, ...]] = {
    "fio": (r"(?:read|write|trim|total)_(?:iops\w*|bw\w*|io_\w+|runtime|(?:c|s)?lat\w*)",
            "usr_cpu", "sys_cpu",
            r"fio\..+"),  # fio's own names kept beside storlab's (fio.read.iops, ...)
    "command": (),  # named by the user (json_metrics, patterns)
    "postmark": (r"\w+_per_s", "total_s", "transactions_s"),
    "sysbench": (r"\w+_per_s", "total_time_s", "total_events",
                 r"latency_(?:min|avg|max|p\d+)_ms"),
    "simulator": (r"(?:(?:get|put|delete|head)_)?(?:ops_s|mb_s|lat_(?:mean|p\d+)_ms)",
                  r"util_\w+", "bottleneck_util"),
    "objectstore": (r"(?:(?:get|put|delete|head)_)?"
                    r"(?:ops_per_s|bytes_per_s|lat_\w+_ms|requests|errors)",
                    "prepare_s"),  # its totals also as fio's read_iops, ... (fio's entry)
    "ceph": (),  # the metrics of the load it drives: fio's, the object store's
}


def is_metric(name: str, kinds: Iterable[str] | None = None) -> bool:
    """Whether the column `name` is a measurement of one of the runners `kinds` (default:
    every runner, since a results table, a CSV or a command's named outputs, may hold any
    of their columns): `total_iops`, `read_clat_p99_us`, `ops_s`, `reads_per_s`, ..."""
    # default: the runners that declare their names (one registered for a while, such as
    # the tuning replay's table oracle, declares none and is not a typo)
    return bool(_metric_pattern(tuple(METRICS if kinds is None else kinds)).match(str(name)))


@functools.cache
def _metric_pattern(kinds: tuple[str, ...]) -> re.Pattern[str]:
    from .errors import CampaignError

    unknown = [k for k in kinds if k not in METRICS]
    if unknown:
        raise CampaignError(f"runner type {unknown[0]!r} must be one of {', '.join(METRICS)}")
    parts = dict.fromkeys(p for k in kinds for p in METRICS[k])  # once each, in order
    return re.compile("^(?:" + "|".join(parts) + ")$" if parts else r"(?!)")
