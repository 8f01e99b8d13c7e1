"""Plackett-Burman designs: the seed's PB(12), balance and orthogonality up to N = 100."""

import numpy as np
import pytest

from storlab.design import make_design, plackett_burman
from storlab.design.pb import pb_matrix
from storlab.errors import DesignError
from storlab.space import Space

# PB(12) as printed in seed 002.
SEED_PB12 = np.array([
    [1, 1, -1, 1, 1, 1, -1, -1, -1, 1, -1],
    [-1, 1, 1, -1, 1, 1, 1, -1, -1, -1, 1],
    [1, -1, 1, 1, -1, 1, 1, 1, -1, -1, -1],
    [-1, 1, -1, 1, 1, -1, 1, 1, 1, -1, -1],
    [-1, -1, 1, -1, 1, 1, -1, 1, 1, 1, -1],
    [-1, -1, -1, 1, -1, 1, 1, -1, 1, 1, 1],
    [1, -1, -1, -1, 1, -1, 1, 1, -1, 1, 1],
    [1, 1, -1, -1, -1, 1, -1, 1, 1, -1, 1],
    [1, 1, 1, -1, -1, -1, 1, -1, 1, 1, -1],
    [-1, 1, 1, 1, -1, -1, -1, 1, -1, 1, 1],
    [1, -1, 1, 1, 1, -1, -1, -1, 1, -1, 1],
    [-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1],
])


def test_pb12_equals_seed_matrix_up_to_row_order():
    x, _ = pb_matrix(12)
    assert sorted(map(tuple, x.astype(int))) == sorted(map(tuple, SEED_PB12))


@pytest.mark.parametrize("n", list(range(4, 101, 4)) + [104, 108, 128])
def test_every_multiple_of_four_is_balanced_and_orthogonal(n):
    x, name = pb_matrix(n)
    assert x.shape == (n, n - 1) and set(np.unique(x)) == {-1.0, 1.0}
    assert not x.sum(axis=0).any(), name
    assert np.array_equal(x.T @ x, n * np.eye(n - 1)), name


def test_cyclic_where_generators_exist():
    for n in (8, 12, 16, 20, 24, 32, 36, 44):
        x, name = pb_matrix(n)
        assert name.startswith("cyclic")
        assert np.array_equal(x[1], np.roll(x[0], 1))


def test_default_size_and_dummies():
    d = plackett_burman(Space.two_level(11))
    assert d.runs == 12 and d.meta["dummies"] == []
    d = plackett_burman(Space.two_level(12))
    assert d.runs == 16 and d.meta["dummies"] == ["dummy1", "dummy2", "dummy3"]
    assert list(d.table.columns[:15])[-3:] == ["dummy1", "dummy2", "dummy3"]
    d = make_design(Space.two_level(5), "pb", runs=20, seed=1)
    assert d.runs == 20 and len(d.meta["dummies"]) == 14


@pytest.mark.parametrize("runs", [10, 8])
def test_bad_sizes(runs):
    with pytest.raises(DesignError):
        plackett_burman(Space.two_level(9), runs=runs)
