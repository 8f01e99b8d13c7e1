"""Closed-form results for single queues: Erlang B/C, M/M/c and M/M/1-PS.

Used to check the simulator and for quick what-if answers on one resource.
Notation: arrival rate ``lam``, per-server service rate ``mu``, ``c`` servers,
offered load ``a = lam/mu`` (erlangs), utilisation ``rho = a/c``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["erlang_b", "erlang_c", "MMc", "mmc", "mm1_ps_response", "mmc_ps_response"]


def erlang_b(c: int, a: float) -> float:
    """Blocking probability of M/M/c/c with offered load ``a`` (stable recursion)."""
    if c < 0 or a < 0:
        raise ValueError("need c >= 0 and a >= 0")
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b


def erlang_c(c: int, a: float) -> float:
    """Probability that an arrival waits in M/M/c with offered load ``a`` (< c)."""
    if c < 1:
        raise ValueError("need c >= 1")
    if not 0 <= a < c:
        raise ValueError(f"unstable: offered load {a} >= {c} servers")
    b = erlang_b(c, a)
    return c * b / (c - a * (1.0 - b))


@dataclass(frozen=True)
class MMc:
    """Steady-state means of an M/M/c FCFS queue."""

    rho: float  # utilisation per server
    p_wait: float  # Erlang C
    wq: float  # mean wait in queue
    w: float  # mean response time (wait + service)
    lq: float  # mean number waiting
    l: float  # mean number present  # noqa: E741


def mmc(lam: float, mu: float, c: int = 1) -> MMc:
    """M/M/c FCFS means (c = 1 gives M/M/1: Wq = rho / (mu - lam))."""
    if lam < 0 or mu <= 0:
        raise ValueError("need lam >= 0 and mu > 0")
    a = lam / mu
    pw = erlang_c(c, a)
    wq = pw / (c * mu - lam)
    w = wq + 1.0 / mu
    return MMc(rho=a / c, p_wait=pw, wq=wq, w=w, lq=lam * wq, l=lam * w)


def mm1_ps_response(lam: float, mu: float) -> float:
    """Mean response time of M/G/1-PS (insensitive to the service distribution)."""
    if lam >= mu:
        raise ValueError("unstable: lam >= mu")
    return 1.0 / (mu - lam)


def mmc_ps_response(lam: float, mu: float, c: int) -> float:
    """Mean response time of M/M/c-PS (rate min(1, c/n) per job).

    With exponential service the number present follows the same birth-death chain
    as M/M/c FCFS, so by Little's law the mean response time is the same.
    """
    return mmc(lam, mu, c).w
