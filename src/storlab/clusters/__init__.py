"""Throwaway single-host clusters (Ceph, Swift) for trying storlab and for its own tests, and
network-namespace "hosts" to load them from (`netns`). The object-store load generator that
drives them is a runner's: `storlab.campaign.runners` (`objload`, `fanout`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._lazy import attach
from ._util import (DEFAULT_BASE, ClusterError, Walled, listening, use_walls, walled,
                    walls_opted_out)

KINDS = ("ceph", "swift")

# The clusters load on first use.
_lazy_names, __getattr__, __dir__ = attach(__name__, {
    "CephCluster": ".ceph", "CephOptions": ".ceph", "SwiftCluster": ".swift",
    "SwiftOptions": ".swift",
})
__all__ = ["CephCluster", "CephOptions", "ClusterError", "DEFAULT_BASE", "KINDS", "SwiftCluster",
           "SwiftOptions", "Walled", "cluster_state", "get_cluster", "listening", "use_walls",
           "walled", "walls_opted_out"]

if TYPE_CHECKING:  # the names above, for type checkers and readers; loaded lazily at run time
    from .ceph import CephCluster, CephOptions
    from .swift import SwiftCluster, SwiftOptions


def get_cluster(kind: str, base: str | Path | None = None) -> Any:
    """The CephCluster or SwiftCluster rooted at `base` (default `_util.default_base()`),
    refused in one line when its directory is not one storlab may trust (`check_trusted_dir`)."""
    if kind == "ceph":
        from .ceph import CephCluster

        return CephCluster(Path(base) if base else None)
    if kind == "swift":
        from .swift import SwiftCluster

        return SwiftCluster(Path(base) if base else None)
    raise ClusterError(f"cluster kind {kind!r} must be one of {', '.join(KINDS)}")


def cluster_state(kind: str, base: str | Path | None = None) -> dict[str, Any]:
    """The saved state of a running, ready cluster; a clear error when there is none, or
    when another process than the daemon storlab started holds its endpoint's port."""
    c = get_cluster(kind, base)
    st = c.state()
    if st is None or not st.get("ready"):
        raise ClusterError(f"no {kind} cluster is up in {c.dir}; run `storlab cluster up "
                           f"{kind}` first")
    c.check_endpoint(st)  # the keys go to the daemon storlab started, not a port squatter
    return st
