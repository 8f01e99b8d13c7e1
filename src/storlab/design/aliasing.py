"""Words, defining relations, word-length patterns and alias structure of two-level designs.

An effect (a main effect or an interaction) is a bitmask over the k factors: bit j set
means factor j takes part. A regular fraction's defining relation is the group of words
whose column product is constant; two effects are aliased when their XOR is in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

#: Resolution in the textbooks' Roman numerals (one definition: design, report, CLI).
ROMAN = {3: "III", 4: "IV", 5: "V", 6: "VI", 7: "VII", 8: "VIII"}


def popcount(x: int) -> int:
    return x.bit_count()


def set_bits(word: int) -> list[int]:
    """The positions of the word's set bits, ascending (a 100-factor design's words have
    3 or 4 of them: looping over every factor instead took most of a minute)."""
    out = []
    while word:
        low = word & -word
        out.append(low.bit_length() - 1)
        word ^= low
    return out


def word_name(word: int, labels: Sequence[str]) -> str:
    """`ABD` for the word with bits 0, 1, 3 (labels joined with ':' when any is longer)."""
    parts = [labels[j] for j in set_bits(word) if j < len(labels)]
    sep = "" if all(len(p) == 1 for p in parts) else ":"
    return sep.join(parts) if parts else "I"


def parse_word(text: str, labels: Sequence[str]) -> int:
    """Inverse of word_name: `ABD` or `A:B:F26` to a bitmask."""
    text = text.strip()
    if text in ("", "I"):
        return 0
    pos = {lab: j for j, lab in enumerate(labels)}
    parts = text.split(":") if ":" in text else (
        [text] if text in pos else list(text))
    word = 0
    for p in parts:
        if p not in pos:
            raise KeyError(p)
        word ^= 1 << pos[p]
    return word


def subgroup(generators: Iterable[int]) -> list[int]:
    """All non-identity words of the group the generator words span."""
    group = {0}
    for g in generators:
        group |= {w ^ g for w in group}
    group.discard(0)
    return sorted(group, key=lambda w: (popcount(w), w))


def wlp(words: Iterable[int], k: int) -> list[int]:
    """Word-length pattern [A1, A2, ..., Ak]: how many words of each length."""
    out = [0] * k
    for w in words:
        out[popcount(w) - 1] += 1
    return out


def resolution(pattern: Sequence[int]) -> int | None:
    """Length of the shortest word; None for a full factorial (no words)."""
    for i, a in enumerate(pattern):
        if a:
            return i + 1
    return None


def roman(n: int | None) -> str:
    """A design resolution as it is written: 3 -> 'III', 6 -> 'VI' (any positive n)."""
    if n is None:
        return ""
    n = int(n)
    if n <= 0:
        return str(n)
    out = []
    for value, numeral in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"),
                           (90, "XC"), (50, "L"), (40, "XL"), (10, "X"), (9, "IX"),
                           (5, "V"), (4, "IV"), (1, "I")):
        while n >= value:
            out.append(numeral)
            n -= value
    return "".join(out)


#: The resolutions a design may ask for (CLI --resolution and a campaign's design).
MIN_RESOLUTION, MAX_RESOLUTION = 3, 16


def parse_resolution(value: str | int) -> int:
    """A resolution as written on the command line or in YAML: `V`, `iv`, `5`, 5 (one
    parser for both). ValueError, naming the accepted spellings, for anything else."""
    n: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    elif isinstance(value, str):
        t = value.strip().upper()
        numerals = {roman(i): i for i in range(MIN_RESOLUTION, MAX_RESOLUTION + 1)}
        n = numerals.get(t, int(t) if t.isdigit() else None)
    if n is None or not MIN_RESOLUTION <= n <= MAX_RESOLUTION:
        raise ValueError(f"resolution {value!r} must be III, IV, V, ... "
                         f"{roman(MAX_RESOLUTION)} (or {MIN_RESOLUTION}, 4, 5, ... "
                         f"{MAX_RESOLUTION})")
    return n


def words_from_matrix(coded: np.ndarray, max_factors: int = 22) -> list[int]:
    """The defining relation read off the columns themselves: every word whose column
    product is constant (+1 or -1) over the runs. Used to check what a design claims."""
    x = np.asarray(coded)
    n, k = x.shape
    if k > max_factors:
        raise ValueError(f"{k} factors is too many to enumerate all 2^{k} words")
    # Pack each column's sign pattern into 64-bit words: product of columns == XOR of bits.
    # An extra all-minus column gives the packed pattern of a constant -1 product.
    bits = np.concatenate([(x < 0), np.ones((n, 1), dtype=bool)], axis=1).astype(np.uint8)
    bits = np.concatenate([bits, np.zeros(((-n) % 64, k + 1), dtype=np.uint8)])
    packed = np.ascontiguousarray(np.packbits(bits.T, axis=1)).view(np.uint64)
    cols, full = packed[:k], packed[k]
    vals = np.zeros((1, cols.shape[1]), dtype=np.uint64)
    for j in range(k):  # subset s -> XOR of its columns, built by doubling
        vals = np.concatenate([vals, vals ^ cols[j]], axis=0)
    const = np.all(vals == 0, axis=1) | np.all(vals == full, axis=1)
    idx = np.flatnonzero(const)
    return sorted((int(i) for i in idx if i), key=lambda w: (popcount(w), w))


def generators_from_matrix(coded: np.ndarray, extra: np.ndarray | None = None
                           ) -> tuple[list[int], list[tuple[int, int, int]],
                                      tuple[int, int] | None]:
    """A two-level design's generators read off its columns, by Gaussian elimination over
    GF(2) on the columns' sign patterns (any number of factors, no enumeration of words).

    Factors are taken in order: a factor whose column is not a product of the earlier basic
    factors' columns (times -1 or +1) is basic, every other one is generated. Returns the
    basic factors' indices, `(factor, word, sign)` per generated factor (`word`: bitmask of
    the basic factors whose product, times `sign`, is its column) and, for an `extra`
    +-1 column (a foldover's block), its `(word, sign)` or None when it is no product of
    factor columns."""
    x = np.asarray(coded)
    n, k = x.shape

    def pattern(col: np.ndarray) -> int:
        return int.from_bytes(np.packbits(np.asarray(col) < 0).tobytes(), "big")

    ones = pattern(-np.ones(n))
    basis: list[tuple[int, int]] = []  # (vector, combination), distinct leading bits
    const = 1 << k                     # the combination bit of the constant -1 column

    def reduce(v: int, combo: int) -> tuple[int, int]:
        for b, bc in basis:  # by decreasing leading bit: a step never sets a higher bit
            if v >> (b.bit_length() - 1) & 1:
                v, combo = v ^ b, combo ^ bc
        return v, combo

    def insert(v: int, combo: int) -> None:
        basis.append((v, combo))
        basis.sort(key=lambda t: -t[0].bit_length())

    insert(ones, const)
    basic: list[int] = []
    generated: list[tuple[int, int, int]] = []
    for j in range(k):
        v, combo = reduce(pattern(x[:, j]), 1 << j)
        if v:
            insert(v, combo)
            basic.append(j)
        else:
            generated.append((j, combo & ~const & ~(1 << j), -1 if combo & const else 1))
    fold = None
    if extra is not None:
        v, combo = reduce(pattern(extra), 0)
        if not v:
            fold = (combo & ~const, -1 if combo & const else 1)
    return basic, generated, fold


def alias_structure(words: Sequence[int], k: int, labels: Sequence[str],
                    max_order: int = 2) -> dict[str, list[str]]:
    """For each main effect and two-factor interaction: the effects of order <= max_order
    it is aliased with (only entries with at least one alias are listed)."""
    effects = [1 << j for j in range(k)]
    if max_order >= 2:
        effects += [(1 << i) | (1 << j) for i in range(k) for j in range(i + 1, k)]
    out: dict[str, list[str]] = {}
    for e in effects:
        partners = sorted({e ^ w for w in words if popcount(e ^ w) <= max_order},
                          key=lambda w: (popcount(w), w))
        if partners:
            out[word_name(e, labels)] = [word_name(p, labels) for p in partners]
    return out


def word_order(word: str) -> int:
    """The order of a named effect: 1 for `A` or `F26`, 2 for `AB` or `A:F26`."""
    return len(word.split(":")) if ":" in word else len(word)


def alias_chains(aliases: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Each alias chain once (the mapping lists A = BD = CE under A, BD and CE): its
    effects by order then name, the chains of main effects first."""
    chains: dict[frozenset[str], list[str]] = {}
    for k, v in aliases.items():
        words = sorted({k, *v}, key=lambda w: (word_order(w), w))
        chains.setdefault(frozenset(words), words)
    return sorted(chains.values(), key=lambda c: (word_order(c[0]), c))


def clear_effects(words: Sequence[int], k: int) -> tuple[list[int], list[int]]:
    """Main effects and 2FIs aliased with no other main effect or 2FI ("clear")."""
    short = [w for w in words if popcount(w) <= 4]
    mains = [1 << j for j in range(k)]
    twos = [(1 << i) | (1 << j) for i in range(k) for j in range(i + 1, k)]
    clear_main = [e for e in mains if all(popcount(e ^ w) > 2 for w in short)]
    clear_2fi = [e for e in twos if all(popcount(e ^ w) > 2 for w in short)]
    return clear_main, clear_2fi


def wlp_from_columns(n: int, columns: Sequence[int]) -> list[int]:
    """Word-length pattern of the 2^n-run design whose k factors are these columns (bit i:
    base factor i), without listing the 2^(k-n) words: by the MacWilliams identity the
    pattern is the dual weight distribution of the row code, whose weights are
    #{columns c : u.c odd} over u in GF(2)^n (Python integers: exact for any k)."""
    k = len(columns)
    cols = np.asarray(columns, dtype=np.int64)
    u = np.arange(2**n, dtype=np.int64)[:, None]
    parity = np.vectorize(popcount, otypes=[np.int64])(u & cols[None, :]) & 1
    hist = np.bincount(parity.sum(axis=1), minlength=k + 1).tolist()
    binom = [[_comb(a, b) for b in range(k + 1)] for a in range(k + 1)]
    out = []
    for j in range(1, k + 1):
        total = 0
        for w, h in enumerate(hist):
            if h:
                total += h * sum((-1) ** i * binom[w][i] * binom[k - w][j - i]
                                 for i in range(min(j, w) + 1) if j - i <= k - w)
        out.append(total >> n)
    return out


def _comb(a: int, b: int) -> int:
    from math import comb

    return comb(a, b) if 0 <= b <= a else 0


def short_words(columns: Sequence[int], max_len: int = 4) -> list[int]:
    """The words of length 3 and 4 (up to max_len <= 4) of the design whose factor j is
    columns[j]: all that aliasing among main effects and 2FIs depends on, found from the
    pairs of columns (no enumeration of the whole defining relation)."""
    pos = {c: j for j, c in enumerate(columns)}
    by_xor: dict[int, list[int]] = {}
    words: set[int] = set()
    k = len(columns)
    for a in range(k):
        for b in range(a + 1, k):
            x = columns[a] ^ columns[b]
            pair = (1 << a) | (1 << b)
            c = pos.get(x)
            if c is not None and c > b:
                words.add(pair | 1 << c)
            if max_len >= 4:
                by_xor.setdefault(x, []).append(pair)
    if max_len >= 4:
        for pairs in by_xor.values():
            for i, p in enumerate(pairs):
                for q in pairs[i + 1:]:
                    if not p & q:
                        words.add(p | q)
    return sorted(words, key=lambda w: (popcount(w), w))


def alias_structure_short(words: Sequence[int], k: int, labels: Sequence[str]
                          ) -> dict[str, list[str]]:
    """`alias_structure` (to 2FIs) from the words of length 3 and 4 alone, in time linear
    in their number: each word splits into an effect and its partner of order <= 2."""
    partners = _short_partners(words, k)
    order = sorted(partners, key=lambda e: (popcount(e), _pair_rank(e)))
    # Every partner is a main effect or a 2FI: a few thousand names, each met many times.
    name = {e: word_name(e, labels) for e in set(partners).union(*partners.values())}
    return {name[e]: [name[p] for p in sorted(partners[e], key=lambda w: (popcount(w), w))]
            for e in order}


def clear_effects_short(words: Sequence[int], k: int) -> tuple[list[int], list[int]]:
    """`clear_effects` from the words of length 3 and 4, in time linear in their number."""
    aliased = _short_partners(words, k)
    mains = [1 << j for j in range(k) if 1 << j not in aliased]
    twos = [(1 << i) | (1 << j) for i in range(k) for j in range(i + 1, k)
            if (1 << i) | (1 << j) not in aliased]
    return mains, twos


def _short_partners(words: Sequence[int], k: int) -> dict[int, set[int]]:
    partners: dict[int, set[int]] = {}
    for w in words:
        bits = [1 << j for j in set_bits(w) if j < k]
        if len(bits) == 3:
            for b in bits:
                partners.setdefault(b, set()).add(w ^ b)
                partners.setdefault(w ^ b, set()).add(b)
        elif len(bits) == 4:
            for i, a in enumerate(bits):
                for b in bits[i + 1:]:
                    partners.setdefault(a | b, set()).add(w ^ (a | b))
    return partners


def _pair_rank(e: int) -> tuple[int, ...]:
    # alias_structure lists 2FIs as (i, j), i < j, i slowest: the bits in ascending order
    return tuple(j for j in range(e.bit_length()) if e >> j & 1)
