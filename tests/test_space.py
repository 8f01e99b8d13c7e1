"""Parameter spaces: YAML loading, coding, constraints parsed safely."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from storlab.constraints import Constraint
from storlab.errors import SpaceError
from storlab.space import Space, parse_size

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "spaces"


def space(**extra):
    d = {"factors": [
        {"name": "block_size", "kind": "ordinal", "values": [1024, 2048, 4096]},
        {"name": "inode_size", "kind": "ordinal", "values": [128, 256, 512, 1024, 2048]},
        {"name": "journal", "kind": "categorical", "values": ["none", "ordered", "writeback"]},
        {"name": "barrier", "kind": "integer", "range": [0, 1]},
        {"name": "iodepth", "kind": "integer", "range": [1, 128], "log": True},
        {"name": "ratio", "kind": "real", "range": [0.0, 1.0], "low": 0.1, "high": 0.9},
    ]}
    d.update(extra)
    return Space.from_dict(d, source="test.yaml")


def test_defaults_low_high_center():
    s = space()
    assert s["block_size"].low == 1024 and s["block_size"].high == 4096
    assert s["iodepth"].low == 1 and s["iodepth"].high == 128
    assert s["iodepth"].center == 11  # geometric mean of 1 and 128, rounded
    assert s["ratio"].center == pytest.approx(0.5)
    assert s["journal"].center is None


def test_coding_round_trip_numeric_and_log():
    f = space()["iodepth"]
    nat = f.from_coded(np.array([-1.0, 1.0, 0.0]))
    assert list(nat) == [1, 128, 11]
    assert np.allclose(f.to_coded([1, 128]), [-1, 1])
    g = space()["ratio"]
    assert np.allclose(g.from_coded(np.array([-1.0, 1.0])), [0.1, 0.9])


def test_categorical_coding_and_no_center():
    f = space()["journal"]
    assert list(f.from_coded(np.array([-1.0, 1.0]))) == ["none", "writeback"]
    with pytest.raises(SpaceError):
        f.from_coded(np.array([0.0]))


def test_sizes_parse():
    assert parse_size("4k") == 4096
    assert parse_size("16MiB") == 16 * 2**20
    assert parse_size("512B") == 512
    with pytest.raises(ValueError):
        parse_size("fast")


def test_constraints_vectorised():
    s = space(constraints=["inode_size <= block_size",
                           'not (journal == "none" and barrier == 1)',
                           'journal in ("none", "ordered") or iodepth * 2 > 4'])
    t = pd.DataFrame({"block_size": [1024, 1024, 4096, 4096],
                      "inode_size": [2048, 256, 256, 256],
                      "journal": ["ordered", "none", "none", "writeback"],
                      "barrier": [0, 1, 0, 0], "iodepth": [1, 1, 1, 1], "ratio": [0.5] * 4})
    assert list(s.feasible(t)) == [False, False, True, False]


@pytest.mark.parametrize("text", ["__import__('os').system('x')", "open('f')", "a.b > 1",
                                  "[x for x in y]", "lambda: 1", "f(1) > 0"])
def test_constraints_reject_code(text):
    with pytest.raises(SpaceError):
        Constraint(text)


def test_constraint_unknown_factor_named():
    with pytest.raises(SpaceError, match="unknown factor"):
        space(constraints=["nosuch > 1"])


@pytest.mark.parametrize("factor,msg", [
    ({"name": "x", "kind": "ordinal"}, "needs 'values'"),
    ({"name": "x", "kind": "real", "range": [5, 1]}, "min < max"),
    ({"name": "x", "kind": "banana", "values": [1, 2]}, "kind 'banana'"),
    ({"name": "x", "values": ["a", "b"], "low": "c"}, "low 'c'"),
    ({"name": "x", "range": [0, 1], "log": True}, "positive range"),
    ({"name": "x", "values": ["a", "b"], "center": "a"}, "center"),
    ({"name": "x", "values": [1], "kind": "ordinal"}, "at least two"),
    ({"name": "x", "range": [1, 2], "colour": 3}, "unknown field"),
])
def test_malformed_factor_errors_name_file_and_factor(factor, msg):
    with pytest.raises(SpaceError) as exc:
        Space.from_dict({"factors": [factor]}, source="bad.yaml")
    text = str(exc.value)
    assert text.startswith("bad.yaml: factor 'x'") and msg in text and "\n" not in text


def test_yaml_errors(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("factors: [unclosed")
    with pytest.raises(SpaceError, match="s.yaml: not valid YAML"):
        Space.from_yaml(p)
    with pytest.raises(SpaceError, match="file not found"):
        Space.from_yaml(tmp_path / "missing.yaml")


def test_duplicate_names():
    with pytest.raises(SpaceError, match="duplicate"):
        Space.from_dict({"factors": [{"name": "a", "range": [0, 1]},
                                     {"name": "a", "range": [0, 1]}]})


def test_validate_config():
    s = space(constraints=["inode_size <= block_size"])
    ok = {"block_size": 4096, "inode_size": 256, "journal": "none", "barrier": 0,
          "iodepth": 8, "ratio": 0.3}
    s.validate(ok)
    with pytest.raises(SpaceError, match="outside"):
        s.validate({**ok, "journal": "fast"})
    with pytest.raises(SpaceError, match="violates"):
        s.validate({**ok, "inode_size": 2048, "block_size": 1024})


def test_two_level_names_skip_i():
    s = Space.two_level(10)
    assert s.names == list("ABCDEFGHJK")


@pytest.mark.parametrize("name,k", [("ceph-filestore-ssd.yaml", 11),
                                    ("ceph-filestore-hdd.yaml", 11), ("fio-pb.yaml", 20),
                                    ("postmark-pb.yaml", 10)])
def test_shipped_examples_load(name, k):
    s = Space.from_yaml(EXAMPLES / name)
    assert s.k == k
    for f in s.factors:
        assert f.contains(f.low) and f.contains(f.high)


def test_hdd_example_is_seed_000s_design():
    # seed 000: a resolution V 2^(11-4) fraction plus 5 center points = 133 runs
    from storlab.design import make_design

    s = Space.from_yaml(EXAMPLES / "ceph-filestore-hdd.yaml")
    d = make_design(s, "fractional", resolution=5, center=5, randomize_order=False)
    assert d.runs == 133 and d.meta["resolution"] == 5
    assert s.factors[5].high == 10 and s.factors[3].low == 1  # A6 +1 = 10, A4 -1 = 1
