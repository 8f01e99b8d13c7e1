"""Erlang B/C and M/M/c against published table values and limiting cases."""

from __future__ import annotations

import math

import pytest

from storlab.sim.queueing import erlang_b, erlang_c, mm1_ps_response, mmc


def test_erlang_b_table_values():
    # Standard Erlang B table: 10 trunks at 5 erlangs -> 1.84%; 1 trunk at 1 erlang -> 1/2.
    assert erlang_b(10, 5.0) == pytest.approx(0.018385, abs=5e-6)
    assert erlang_b(1, 1.0) == pytest.approx(0.5)
    assert erlang_b(0, 3.0) == 1.0


def test_erlang_c_against_closed_form_sum():
    for c, a in [(1, 0.5), (2, 1.5), (4, 3.6), (10, 8.0)]:
        s = sum(a**k / math.factorial(k) for k in range(c))
        top = a**c / math.factorial(c) * c / (c - a)
        assert erlang_c(c, a) == pytest.approx(top / (s + top), rel=1e-12)


def test_mm1_and_mmc_means():
    q = mmc(0.9, 1.0, 1)
    assert q.wq == pytest.approx(9.0) and q.w == pytest.approx(10.0) and q.l == pytest.approx(9.0)
    q4 = mmc(3.6, 1.0, 4)  # the notes' SimPy check quotes Wq = 1.969 for this queue
    assert q4.wq == pytest.approx(1.969, abs=5e-4)
    assert q4.l == pytest.approx(3.6 * q4.w)
    assert mm1_ps_response(0.7, 1.0) == pytest.approx(1 / 0.3)


def test_unstable_is_rejected():
    with pytest.raises(ValueError, match="unstable"):
        erlang_c(2, 2.0)
    with pytest.raises(ValueError, match="unstable"):
        mm1_ps_response(1.0, 1.0)
