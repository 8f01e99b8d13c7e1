"""A Swift-like object ring: path -> partition -> replica devices, plus handoffs.

As in Swift: the partition of an object is the top `part_power` bits of the md5 of
`prefix + /account/container/object + suffix`; a table `r2p2d[replica, partition]` names the
device of each replica; the table gives every device a share of the partition-replicas
proportional to its weight while keeping the replicas of one partition in different zones
(then nodes) whenever the weights allow it; extra "handoff" devices, preferring unused zones,
stand in for failed primaries.

The placement is our own (not Swift's iterative builder), chosen because it is exact and
vectorised: device quotas by largest remainder; one sequence of P*R slots laid out zone by
zone and node by node (zone and node order shuffled, each node's slots shuffled among its
devices); replica row r takes slots [r*P, (r+1)*P). Two positions P apart can only fall in
the same zone when that zone holds more than P slots, i.e. more than 1/R of the weight, and
then the number of partitions with a doubled zone is the pigeonhole minimum. Balance is
within one partition of the weight-fair share, well inside Swift's 1 % rebalance target.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

#: Swift's rebalance loop stops once `get_balance()` is below 1 (per cent).
SWIFT_BALANCE_TARGET = 1.0


def hash_partition(paths: Iterable[str], part_power: int, prefix: bytes = b"",
                   suffix: bytes = b"storlab") -> np.ndarray:
    """Partition of each path: top `part_power` bits of md5(prefix + path + suffix)."""
    shift = 32 - part_power
    # md5 has no vectorised numpy form; hashlib in a loop does ~2 M paths/s.
    out = [int.from_bytes(hashlib.md5(prefix + p.encode() + suffix).digest()[:4], "big") >> shift
           for p in paths]
    return np.asarray(out, dtype=np.int64)


@dataclass
class Ring:
    """`r2p2d[r, p]`: device of replica r of partition p. Devices carry node, zone, weight."""

    part_power: int
    r2p2d: np.ndarray          # int32 [replicas, 2**part_power]
    dev_node: np.ndarray       # int32 per device
    dev_zone: np.ndarray       # int32 per device
    dev_weight: np.ndarray     # float per device
    seed: int = 0
    prefix: bytes = b""
    suffix: bytes = b"storlab"

    @property
    def replicas(self) -> int:
        return int(self.r2p2d.shape[0])

    @property
    def partitions(self) -> int:
        return 1 << self.part_power

    @classmethod
    def build(cls, dev_node: Sequence[int], dev_zone: Sequence[int], dev_weight: Sequence[float],
              part_power: int, replicas: int, seed: int = 0) -> "Ring":
        """Place every partition-replica; see the module docstring for the layout."""
        node = np.asarray(dev_node, dtype=np.int32)
        zone = np.asarray(dev_zone, dtype=np.int32)
        weight = np.asarray(dev_weight, dtype=float)
        if not (node.shape == zone.shape == weight.shape) or node.size == 0:
            raise ValueError("ring needs at least one device, with node, zone and weight each")
        if np.any(weight < 0) or weight.sum() <= 0:
            raise ValueError("device weights must be >= 0 with a positive total")
        if not 1 <= part_power <= 24:
            raise ValueError(f"part_power {part_power} outside 1..24")
        if replicas < 1:
            raise ValueError(f"replicas {replicas} < 1")
        parts = 1 << part_power
        if replicas > int(np.count_nonzero(weight)):
            raise ValueError(f"{replicas} replicas need as many devices with weight > 0")
        quota = _quotas(weight, parts * replicas, cap=parts)
        rng = np.random.default_rng(seed)
        # Slot sequence: zones in random order, nodes in random order inside each zone, each
        # node's slots shuffled among its devices. One float sort does the shuffle: key =
        # node block number + a uniform fraction.
        zone_rank = rng.permutation(int(zone.max()) + 1)[zone]
        node_rank = rng.permutation(int(node.max()) + 1)[node]
        dev_order = np.lexsort((node_rank, zone_rank))
        block = np.empty(node.size, dtype=np.int64)
        sorted_nodes = node[dev_order]
        block[dev_order] = np.concatenate(([0], np.cumsum(sorted_nodes[1:] != sorted_nodes[:-1])))
        slots = np.repeat(dev_order.astype(np.int32), quota[dev_order])
        seq = slots[np.argsort(block[slots] + rng.random(slots.size), kind="stable")]
        # Same random partition permutation for every row keeps the P-apart pairing.
        perm = rng.permutation(parts)
        r2p2d = seq.reshape(replicas, parts)[:, perm]
        return cls(part_power, np.ascontiguousarray(r2p2d), node, zone, weight, seed)

    # -- lookups ---------------------------------------------------------------------------
    def partition(self, paths: Iterable[str]) -> np.ndarray:
        return hash_partition(paths, self.part_power, self.prefix, self.suffix)

    def get_part_nodes(self, part: int) -> list[int]:
        """Primary devices of a partition, de-duplicated in replica order (as Swift does)."""
        seen: list[int] = []
        for d in self.r2p2d[:, part].tolist():
            if d not in seen:
                seen.append(d)
        return seen

    def handoffs(self, part: int, count: int | None = None) -> list[int]:
        """Devices to use when primaries fail: unused zones first, then unused nodes, then
        the rest; a stable order per partition (seeded by the ring seed and partition)."""
        primaries = self.get_part_nodes(part)
        used_zones = set(self.dev_zone[primaries].tolist())
        used_nodes = set(self.dev_node[primaries].tolist())
        rng = np.random.default_rng([self.seed, part])
        order = rng.permutation(self.dev_node.size)
        order = order[(self.dev_weight[order] > 0) & ~np.isin(order, primaries)]
        tier = np.where(np.isin(self.dev_zone[order], list(used_zones)),
                        np.where(np.isin(self.dev_node[order], list(used_nodes)), 2, 1), 0)
        out = order[np.argsort(tier, kind="stable")].tolist()
        return out if count is None else out[:count]

    # -- reports ---------------------------------------------------------------------------
    def parts_per_device(self) -> np.ndarray:
        return np.bincount(self.r2p2d.ravel(), minlength=self.dev_node.size)

    def wanted(self) -> np.ndarray:
        """Weight-fair partition-replica count of each device (fractional)."""
        return self.dev_weight / self.dev_weight.sum() * self.partitions * self.replicas

    def balance(self) -> float:
        """Swift's balance: worst |assigned / wanted - 1| over weighted devices, per cent."""
        w = self.wanted()
        have = self.parts_per_device()
        m = w > 0
        return float(np.max(np.abs(have[m] / w[m] - 1.0)) * 100.0)

    def zone_duplicates(self) -> int:
        """Partitions with two replicas in one zone."""
        z = np.sort(self.dev_zone[self.r2p2d], axis=0)
        return int(np.count_nonzero(np.any(z[1:] == z[:-1], axis=0)))

    def min_zone_duplicates(self) -> int:
        """Fewest partitions that must have two replicas in one zone, given how many replicas
        each zone holds: a partition without a duplicate takes one replica from each of R
        zones, so at most min over k of (replicas outside the k fullest zones) / (R - k)
        partitions can go without one."""
        share = np.sort(np.bincount(self.dev_zone, weights=self.parts_per_device()))[::-1]
        r = self.replicas
        rainbow = min(int(share[k:].sum() // (r - k)) for k in range(r))
        return int(self.partitions - min(self.partitions, rainbow))

    def excess_zone_replicas(self) -> int:
        """Replicas beyond one per partition in each zone (what placing at most two of a
        partition's replicas in a zone leaves duplicated)."""
        share = np.bincount(self.dev_zone, weights=self.parts_per_device())
        return int(np.sum(np.maximum(share - self.partitions, 0)))


def _quotas(weight: np.ndarray, total: int, cap: int) -> np.ndarray:
    """Integer shares of `total` proportional to `weight` (largest remainder), none above
    `cap` (a device holds at most one replica of a partition); capped excess is spread over
    the other devices by weight."""
    quota = np.zeros(weight.size, dtype=np.int64)
    free = weight > 0
    remaining = total
    while remaining > 0:
        w = np.where(free, weight, 0.0)
        exact = w / w.sum() * remaining
        q = np.floor(exact).astype(np.int64)
        short = remaining - int(q.sum())
        if short:
            q[np.argsort(-(exact - q), kind="stable")[:short]] += 1
        quota += q
        over = quota > cap
        if not over.any():
            break
        remaining = int((quota[over] - cap).sum())
        quota[over] = cap
        free &= ~over
        if not free.any():
            raise ValueError("too few devices for the replica count")
    return quota
