"""Plackett-Burman screening designs for every N that is a multiple of 4 up to 100 (and
beyond where a construction applies).

Construction, in order of preference:
- cyclic generators (Plackett and Burman 1946): a first row shifted cyclically N-1 times
  plus a row of minus signs. Such rows come from the quadratic residues mod a prime
  q = N-1 = 3 (mod 4) (Paley I; these are exactly PB's published rows for 12, 20, 24,
  44, ...), from a maximal-length shift-register sequence when N is a power of two, and
  from twin primes q(q+2) = N-1 (N = 36);
- otherwise Paley I over a prime-power field, Paley II (N = 2(q+1), q = 1 mod 4),
  Sylvester doubling of a smaller Hadamard matrix, and Williamson's construction (N = 92).
Every matrix is checked to be Hadamard before use.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..errors import DesignError
from ..space import Factor, Space
from .base import Design, from_coded


# --------------------------------------------------------------------------- finite fields
def _prime_power(q: int) -> tuple[int, int] | None:
    """(p, m) with q = p**m for a prime p, else None."""
    for p in range(2, q + 1):
        if q % p == 0:
            m, r = 0, q
            while r % p == 0:
                r //= p
                m += 1
            return (p, m) if r == 1 else None
    return None


def _is_prime(q: int) -> bool:
    return q >= 2 and all(q % d for d in range(2, int(q**0.5) + 1))


def _field_chi(q: int) -> np.ndarray:
    """Quadratic character table chi[i, j] = chi(x_i - x_j) over GF(q) (elements indexed
    0..q-1, element 0 is the zero), built with polynomial arithmetic mod an irreducible."""
    pm = _prime_power(q)
    assert pm is not None
    p, m = pm
    # Elements as coefficient vectors (base p digits of the index).
    digits = np.array([[(i // p**d) % p for d in range(m)] for i in range(q)])

    def to_index(vec: np.ndarray) -> int:
        return int(sum(int(v) * p**d for d, v in enumerate(vec)))

    irreducible = _irreducible(p, m)

    def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        prod = np.zeros(2 * m - 1, dtype=int)
        for i, ai in enumerate(a):
            prod[i:i + m] += ai * b
        prod %= p
        for d in range(2 * m - 2, m - 1, -1):  # reduce by the monic irreducible
            c = prod[d]
            if c:
                prod[d - m:d + 1] = (prod[d - m:d + 1] - c * irreducible) % p
        return prod[:m]

    squares = {to_index(mul(digits[i], digits[i])) for i in range(1, q)}
    chi_of = np.array([0] + [1 if i in squares else -1 for i in range(1, q)])
    diff = np.array([[to_index((digits[i] - digits[j]) % p) for j in range(q)]
                     for i in range(q)])
    return chi_of[diff]


def _irreducible(p: int, m: int) -> np.ndarray:
    """Coefficients (low to high, monic) of an irreducible polynomial of degree m over GF(p)."""
    if m == 1:
        return np.array([0, 1])
    for code in range(p**m):
        low = [(code // p**d) % p for d in range(m)]
        poly = np.array(low + [1])
        if low[0] == 0:
            continue
        # Degree <= 3 here (q <= ~1000): irreducible iff no root and, for m = 4, no quadratic
        # factor; checking all monic factors of degree <= m // 2 is cheap at these sizes.
        if all(_polymod(poly, np.array(f + [1]), p).any()
               for deg in range(1, m // 2 + 1)
               for f in ([(c // p**d) % p for d in range(deg)] for c in range(p**deg))):
            return poly
    raise AssertionError("no irreducible polynomial found")  # pragma: no cover


def _polymod(a: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    a = a.copy() % p
    db = len(b) - 1
    for d in range(len(a) - 1, db - 1, -1):
        c = a[d]
        if c:
            a[d - db:d + 1] = (a[d - db:d + 1] - c * b) % p
    return a[:db]


# --------------------------------------------------------------------------- constructions
def _cyclic_from_row(row: np.ndarray) -> np.ndarray:
    """N-1 cyclic right-shifts of a first row, then a row of minus signs (PB's layout)."""
    n1 = len(row)
    if row.sum() < 0:  # the closing row of minus signs needs rows summing to +1
        row = -row
    rows = np.stack([np.roll(row, i) for i in range(n1)])
    return np.vstack([rows, -np.ones(n1)])


def _paley_row(q: int) -> np.ndarray:
    """Quadratic-residue row mod a prime q = 3 mod 4, chi(0) taken as +1 (PB's convention)."""
    residues = {(i * i) % q for i in range(1, q)}
    return np.array([1.0] + [1.0 if i in residues else -1.0 for i in range(1, q)])


def _msequence_row(m: int) -> np.ndarray:
    """A maximal-length shift-register sequence of period 2^m - 1, as +/-1."""
    taps = {2: (2, 1), 3: (3, 2), 4: (4, 3), 5: (5, 3), 6: (6, 5), 7: (7, 6), 8: (8, 6, 5, 4),
            9: (9, 5), 10: (10, 7)}[m]
    state = [1] * m
    out = []
    for _ in range(2**m - 1):
        out.append(state[-1])
        fb = 0
        for t in taps:
            fb ^= state[t - 1]
        state = [fb] + state[:-1]
    return np.where(np.array(out) == 1, 1.0, -1.0)


def _twin_prime_row(p: int) -> np.ndarray:
    """Cyclic row of length p(p+2) from the twin-prime difference set."""
    n = p * (p + 2)
    qr_p = {(i * i) % p for i in range(1, p)}
    qr_q = {(i * i) % (p + 2) for i in range(1, p + 2)}

    def chi(x: int, m: int, qr: set[int]) -> int:
        x %= m
        return 0 if x == 0 else (1 if x in qr else -1)

    row = np.empty(n)
    for x in range(n):
        a, b = chi(x, p, qr_p), chi(x, p + 2, qr_q)
        if x % (p + 2) == 0:
            row[x] = 1.0
        elif x % p == 0:
            row[x] = -1.0
        else:
            row[x] = float(a * b)
    return row


def _paley1(q: int) -> np.ndarray:
    """Hadamard of order q+1 (q = 3 mod 4 prime power), normalised."""
    chi = _field_chi(q)
    s = np.zeros((q + 1, q + 1))
    s[0, 1:] = 1
    s[1:, 0] = -1
    s[1:, 1:] = chi
    return s + np.eye(q + 1)


def _paley2(q: int) -> np.ndarray:
    """Hadamard of order 2(q+1) (q = 1 mod 4 prime power)."""
    chi = _field_chi(q)
    c = np.zeros((q + 1, q + 1))
    c[0, 1:] = 1
    c[1:, 0] = 1
    c[1:, 1:] = chi
    a = np.array([[1.0, -1.0], [-1.0, -1.0]])
    b = np.array([[1.0, 1.0], [1.0, -1.0]])
    return np.kron(c, a) + np.kron(np.eye(q + 1), b)


# Williamson's construction for N = 92 = 4 x 23, the one multiple of 4 up to 100 that
# Paley and Sylvester do not reach: four symmetric circulant +/-1 matrices of order 23 with
# A^2 + B^2 + C^2 + D^2 = 92 I. These first rows were found by storlab's own
# meet-in-the-middle search over symmetric sequences (periodic autocorrelations of the four
# summing to zero, row sums 3, 3, 5, 7); `_is_hadamard` checks the result on use.
_WILLIAMSON_23 = (
    "+-+++--++-+--+-++--+++-",
    "+-+--+++++----+++++--+-",
    "+--++-+-+------+-+-++--",
    "+++++-++---++---++-++++",
)


def _williamson(rows: tuple[str, ...]) -> np.ndarray:
    mats = [np.stack([np.roll(np.array([1.0 if ch == "+" else -1.0 for ch in r]), i)
                      for i in range(len(r))]) for r in rows]
    a, b, c, d = mats
    return np.block([[a, b, c, d], [-b, a, -d, c], [-c, d, a, -b], [-d, -c, b, a]])


def _is_hadamard(h: np.ndarray) -> bool:
    n = h.shape[0]
    return h.shape == (n, n) and np.array_equal(h.T @ h, n * np.eye(n))


@lru_cache(maxsize=None)
def _hadamard(n: int) -> tuple[np.ndarray, str]:
    """A Hadamard matrix of order n and the name of its construction."""
    if n == 1:
        return np.ones((1, 1)), "trivial"
    if n == 2:
        return np.array([[1.0, 1.0], [1.0, -1.0]]), "Sylvester"
    if n % 4:
        raise DesignError(f"Plackett-Burman designs need a multiple of 4 runs, not {n}")
    q = n - 1
    pp = _prime_power(q)
    if pp is not None and q % 4 == 3:
        return _paley1(q), "Paley I"
    if n % 2 == 0 and (n // 2) % 2 == 0:
        q2 = n // 2 - 1
        pp2 = _prime_power(q2)
        if pp2 is not None and q2 % 4 == 1:
            return _paley2(q2), "Paley II"
    if n == 92:
        h = _williamson(_WILLIAMSON_23)
        if _is_hadamard(h):
            return h, "Williamson"
    if n % 8 == 0 or (n // 2) % 4 == 0:
        try:
            half, name = _hadamard(n // 2)
            return np.kron(np.array([[1.0, 1.0], [1.0, -1.0]]), half), f"Sylvester x {name}"
        except DesignError:
            pass
    raise DesignError(f"no Hadamard construction for {n} runs is known to storlab")


@lru_cache(maxsize=None)
def pb_matrix(n: int) -> tuple[np.ndarray, str]:
    """The N x (N-1) two-level PB matrix and its construction's name."""
    if n < 4 or n % 4:
        raise DesignError(f"Plackett-Burman designs need a multiple of 4 runs (>= 4), not {n}")
    q = n - 1
    if _is_prime(q) and q % 4 == 3:
        return _cyclic_from_row(_paley_row(q)), "cyclic (quadratic residues)"
    if n & (n - 1) == 0 and 3 <= n.bit_length() - 1 <= 10:
        return _cyclic_from_row(_msequence_row(n.bit_length() - 1)), "cyclic (m-sequence)"
    for p in range(3, int(q**0.5) + 1):
        if p * (p + 2) == q and _is_prime(p) and _is_prime(p + 2):
            return _cyclic_from_row(_twin_prime_row(p)), "cyclic (twin primes)"
    if n == 4:
        return _cyclic_from_row(np.array([1.0, 1.0, -1.0])), "cyclic"
    h, name = _hadamard(n)
    h = h * h[:, [0]]  # normalise: first column all +1, then drop it
    x = h[:, 1:]
    if not np.array_equal(x.T @ x, n * np.eye(n - 1)) or np.any(x.sum(axis=0)):
        raise AssertionError(f"{name} construction of {n} failed")  # pragma: no cover
    return x, name


def plackett_burman(space: Space, runs: int | None = None) -> Design:
    """A PB screening design: the smallest N > k that is a multiple of 4 unless `runs`
    says otherwise. Unused columns stay as dummy factors `dummy1`, ... for error estimation.
    """
    k = space.k
    n = runs if runs is not None else 4 * (k // 4 + 1)
    if n <= k:
        raise DesignError(f"a Plackett-Burman design for {k} factors needs more than {k} runs "
                          f"(e.g. {4 * (k // 4 + 1)}), not {n}")
    x, construction = pb_matrix(n)
    if not _checked(x):
        raise AssertionError("PB matrix is not orthogonal")  # pragma: no cover
    dummies = [Factor(f"dummy{i + 1}", "real", range=(-1.0, 1.0), low=-1.0, high=1.0,
                      center=0.0, description="unassigned PB column (error estimate)")
               for i in range(n - 1 - k)]
    full = Space(space.factors + dummies, space.constraints, space.responses, space.name,
                 space.labels + [f"d{i + 1}" for i in range(len(dummies))])
    meta = {"kind": "pb", "construction": construction, "resolution": 3,
            "resolution_roman": "III",
            "dummies": [d.name for d in dummies]}
    d = from_coded(full, x, meta)
    return d


def _checked(x: np.ndarray) -> bool:
    n = x.shape[0]
    return bool(np.array_equal(x.T @ x, n * np.eye(x.shape[1])))
