"""Swift's object ring: path -> partition -> replica devices, plus handoffs.

As in Swift: the partition of an object is the top `part_power` bits of the md5 of
`prefix + /account/container/object + suffix`; a table `r2p2d[replica, partition]` names the
device of each replica; `handoffs` lists the devices that stand in for failed primaries in
the order Swift's `Ring.get_more_nodes` yields them.

The table comes from a ring file Swift wrote (`storlab.sim.ringfile`) or is built here:
`placement="swift"` runs Swift's RingBuilder initial rebalance (`storlab.sim.ringbuild`,
identical assignments for the same devices and seed), its partition walk in the compiled
engine at any size. Without the engine the walk is pure Python (about 2 s per 200,000
partition-replicas), so "auto" then uses `"fast"` above `SWIFT_PLACEMENT_LIMIT`:
Swift's own per-device counts (same replica plan), laid out as one sequence of P*R slots
tier by tier (regions, zones, servers in seeded random order, each device's slots
contiguous), replica row r taking slots [r*P, (r+1)*P) under one partition permutation. A
contiguous block of c slots holds at most ceil(c/P) of a partition's replicas, so a device
(at most P slots) never holds two, and every tier keeps Swift's dispersion maximum. Its
weakness: a device's partitions share their other replicas with few devices (Swift spreads
them), which concentrates a failed device's load on those.
"""

from __future__ import annotations

import array
import hashlib
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .engine import compiled_function
from .ringbuild import RingBuildError, parts_wanted, replica_plan, swift_rebalance

#: Swift's rebalance loop stops once `get_balance()` is below 1 (per cent).
SWIFT_BALANCE_TARGET = 1.0


def hash_partition(paths: Iterable[str | bytes], part_power: int, prefix: bytes = b"",
                   suffix: bytes = b"storlab") -> np.ndarray:
    """Partition of each path (str, or bytes already encoded): top `part_power` bits of
    md5(prefix + path + suffix)."""
    shift = 32 - part_power
    md5, from_bytes = hashlib.md5, int.from_bytes
    # md5 has no vectorised numpy form; hashlib in a loop does ~1 M paths/s here.
    out = [from_bytes(md5(prefix + (p if isinstance(p, bytes) else p.encode()) + suffix)
                      .digest()[:4], "big") >> shift for p in paths]
    return np.asarray(out, dtype=np.int64)


#: Largest partitions x replicas placed by the exact Swift builder when placement is "auto"
#: and the compiled engine is not built (with it, every size is).
SWIFT_PLACEMENT_LIMIT = 3 << 16


@dataclass
class Ring:
    """`r2p2d[r, p]`: device of replica r of partition p. Devices carry node (the server
    tier, Swift's IP), zone, region and weight."""

    part_power: int
    r2p2d: np.ndarray          # int32 [replicas, 2**part_power]
    dev_node: np.ndarray       # int32 per device
    dev_zone: np.ndarray       # int32 per device
    dev_weight: np.ndarray     # float per device
    seed: int = 0
    prefix: bytes = b""
    suffix: bytes = b"storlab"
    dev_region: np.ndarray | None = None   # int per device (None: one region)
    placement: str = "swift"
    dev_server: np.ndarray | None = None   # Swift's server tier (IP) per device (None: node)

    def __post_init__(self) -> None:
        if self.dev_region is None:
            self.dev_region = np.zeros(self.dev_node.size, dtype=np.int32)
        if self.dev_server is None:
            self.dev_server = self.dev_node
        self._handoff_cache: dict[int, list[int]] = {}
        self._rows: list[array.array] | None = None        # r2p2d rows, for handoffs
        self._counts: tuple[int, int, int, int] | None = None

    @property
    def replicas(self) -> int:
        return int(self.r2p2d.shape[0])

    @property
    def partitions(self) -> int:
        return 1 << self.part_power

    @classmethod
    def build(cls, dev_node: Sequence[int], dev_zone: Sequence[int], dev_weight: Sequence[float],
              part_power: int, replicas: int, seed: int = 0, placement: str = "auto",
              dev_region: Sequence[int] | None = None, overload: float = 0.0) -> "Ring":
        """Place every partition-replica as Swift's builder does (see the module docstring);
        `placement`: "swift" (exact), "fast" (same counts and dispersion), "auto" (swift,
        or fast for a large ring when the compiled engine is not built)."""
        node = np.asarray(dev_node, dtype=np.int32)
        zone = np.asarray(dev_zone, dtype=np.int32)
        weight = np.asarray(dev_weight, dtype=float)
        region = (np.zeros(node.size, dtype=np.int32) if dev_region is None
                  else np.asarray(dev_region, dtype=np.int32))
        if not (node.shape == zone.shape == weight.shape == region.shape) or node.size == 0:
            raise ValueError("ring needs at least one device, with node, zone and weight each")
        if np.any(weight < 0) or weight.sum() <= 0:
            raise ValueError("device weights must be >= 0 with a positive total")
        if not 1 <= part_power <= 24:
            raise ValueError(f"part_power {part_power} outside 1..24")
        if replicas < 1:
            raise ValueError(f"replicas {replicas} < 1")
        if replicas > int(np.count_nonzero(weight)):
            raise ValueError(f"{replicas} replicas need as many devices with weight > 0")
        if placement == "auto":
            small = (replicas << part_power) <= SWIFT_PLACEMENT_LIMIT
            placement = "swift" if small or compiled_function("ring_place") else "fast"
        if placement not in ("swift", "fast"):
            raise ValueError(f"placement {placement!r} is not swift, fast or auto")
        key = (node.tobytes(), zone.tobytes(), weight.tobytes(), region.tobytes(), part_power,
               replicas, seed, placement, overload)
        r2p2d = _BUILD_CACHE.get(key)
        if r2p2d is None:
            args = (region.tolist(), zone.tolist(), node.tolist(), weight.tolist())
            try:
                if placement == "swift":
                    r2p2d = swift_rebalance(*args, part_power, replicas, seed, overload)
                else:
                    r2p2d = _fast_layout(*args, part_power, replicas, seed, overload)
            except RingBuildError as exc:
                raise ValueError(str(exc)) from None
            if len(_BUILD_CACHE) > 8:  # sweeps rebuild the same ring for every other factor
                _BUILD_CACHE.clear()
            _BUILD_CACHE[key] = r2p2d
        return cls(part_power, r2p2d, node, zone, weight, seed, dev_region=region,
                   placement=placement)

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
        """Devices that stand in for failed primaries, in Swift's `get_more_nodes` order:
        walking the ring from a partition picked by md5(str(part)), first devices in unused
        regions, then unused zones, then unused servers, then any unused device."""
        if count is not None:
            return list(itertools.islice(self.iter_handoffs(part), count))
        out = self._handoff_cache.get(part)
        if out is None:
            out = list(self.iter_handoffs(part))
            if len(self._handoff_cache) > 10_000:
                self._handoff_cache.clear()
            self._handoff_cache[part] = out
        return list(out)

    def iter_handoffs(self, part: int) -> Iterator[int]:
        """`handoffs` lazily (a large ring's full list walks every partition)."""
        if self._rows is None:   # compact rows, fast to index one element at a time
            self._rows = [array.array("i", np.ascontiguousarray(r, dtype=np.int32).tobytes())
                          for r in self.r2p2d]
        rows = self._rows
        if self._counts is None:
            # Swift counts only devices holding partitions, so its passes stop early.
            assigned = np.unique(self.r2p2d)
            self._counts = (np.unique(self.dev_region[assigned]).size,
                            len(set(zip(self.dev_region[assigned].tolist(),
                                        self.dev_zone[assigned].tolist()))),
                            len(set(zip(self.dev_region[assigned].tolist(),
                                        self.dev_zone[assigned].tolist(),
                                        self.dev_server[assigned].tolist()))),
                            assigned.size)
        n_reg, n_zone, n_ip, n_dev = self._counts
        reg = self.dev_region.tolist()
        zon = self.dev_zone.tolist()
        ipn = self.dev_server.tolist()
        prim = self.get_part_nodes(part)
        used = set(prim)
        regions = {reg[d] for d in prim}
        zones = {(reg[d], zon[d]) for d in prim}
        ips = {(reg[d], zon[d], ipn[d]) for d in prim}
        parts = self.partitions
        shift = 32 - self.part_power
        start = int.from_bytes(hashlib.md5(str(part).encode("ascii")).digest()[:4], "big") >> shift
        inc = parts // 65536 or 1
        walk = (range(start, parts, inc), range(inc - ((parts - start) % inc), start, inc))

        def take(d: int) -> None:
            used.add(d)
            regions.add(reg[d])
            zones.add((reg[d], zon[d]))
            ips.add((reg[d], zon[d], ipn[d]))

        # Four passes, each looking for devices new at one tier (region, zone, server, any).
        tiers = ((lambda d: reg[d], regions, n_reg),
                 (lambda d: (reg[d], zon[d]), zones, n_zone),
                 (lambda d: (reg[d], zon[d], ipn[d]), ips, n_ip),
                 (lambda d: d, used, n_dev))
        for tier_of, seen, total in tiers:
            if len(seen) >= total:
                continue
            done = False
            for hp in itertools.chain(*walk):
                for row in rows:
                    d = row[hp]
                    if d not in used and tier_of(d) not in seen:
                        take(d)
                        yield d
                        if len(seen) >= total:
                            done = True
                            break
                if done:
                    break

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


_BUILD_CACHE: dict[tuple, np.ndarray] = {}


def _fast_layout(region: list, zone: list, node: list, weight: list[float], part_power: int,
                 replicas: int, seed: int, overload: float) -> np.ndarray:
    """Swift's per-device counts laid out tier by tier (see the module docstring)."""
    n = len(weight)
    parts = 1 << part_power
    devs = [(region[i], zone[i], node[i], i) for i in range(n)]
    plan = replica_plan(devs, weight, parts, replicas, overload)
    quota = _fit_tiers(np.maximum(np.asarray(parts_wanted(devs, weight, plan, parts,
                                                          replicas)), 0), devs, plan, parts)
    rng = np.random.default_rng(seed)
    reg = np.asarray(region)
    zon = np.asarray(zone)
    nod = np.asarray(node)
    # Random rank of every region, zone and server; devices sorted by (region, zone, server).
    rr = rng.permutation(int(reg.max()) + 1)[reg]
    zr = rng.permutation(int(zon.max()) + 1)[zon]
    nr = rng.permutation(int(nod.max()) + 1)[nod]
    order = np.lexsort((np.arange(n), nr, zr, rr))
    slots = np.repeat(order.astype(np.int32), quota[order])
    if slots.size != parts * replicas:
        raise RingBuildError("replica plan does not cover every partition-replica")
    perm = rng.permutation(parts)
    return np.ascontiguousarray(slots.reshape(replicas, parts)[:, perm])


def _fit_tiers(quota: np.ndarray, devs: list[tuple], plan: dict, parts: int) -> np.ndarray:
    """Swift's per-device counts, trimmed so that no region, zone, server or device has more
    slots than its plan's maximum replicas times the partitions: the layout keeps a tier's
    dispersion only then. Swift's counts can exceed it by float rounding (a server planned
    for 1 replica at target 0.9999999999999996 got 257 of 256 partitions, and the layout put
    two replicas of a partition on it); Swift's own placement then leaves a device short,
    here the excess moves one slot at a time from the tier's fullest device to the device
    whose other tiers have the most room."""
    quota = quota.copy()
    tiers = [[d[:k] for k in (1, 2, 3, 4)] for d in devs]  # region .. device
    members: dict[tuple, list[int]] = {}
    for i, ts in enumerate(tiers):
        for t in ts:
            members.setdefault(t, []).append(i)

    def room(t: tuple) -> int:
        return plan[t][2] * parts - int(quota[members[t]].sum()) if t in plan else 0

    for t, idx in members.items():
        while room(t) < 0:
            give = max(idx, key=lambda i: (quota[i], -i))
            # a tier both devices share keeps its count: only the receiver's others need room
            others = {j: [u for u in tiers[j] if u not in tiers[give]]
                      for j in range(len(devs)) if j not in idx and 0 < quota[j] < parts}
            take = {j: min(room(u) for u in us) for j, us in others.items()
                    if us and all(room(u) > 0 for u in us)}
            if not take:
                break  # no receiver has room: Swift's count stays (never seen in 6,000 rings)
            j = max(take, key=lambda j: (take[j], -j))
            quota[give] -= 1
            quota[j] += 1
    return quota
