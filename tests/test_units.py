"""The one units grammar (storlab.units), and every input path reading it the same way."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from storlab import units
from storlab.errors import StorlabError, UnitsError

#: Spelling -> bytes under fio's default kb_base=1024 (KiB read as IEC 1024, see units).
SAME = {
    "4k": 4096, "4K": 4096, "4KB": 4096, "4kb": 4096, "4KiB": 4096, "4 KiB": 4096,
    "64KiB": 65536, "1M": 1 << 20, "1MiB": 1 << 20, "1.5M": 1572864, "1.5MiB": 1572864,
    "512B": 512, "512": 512, "2g": 2 << 30, "1T": 1 << 40, "1p": 1 << 50,
}


@pytest.mark.parametrize("text, expected", sorted(SAME.items()))
def test_grammar(text, expected):
    assert units.parse_size(text) == expected
    assert units.to_number(text) == expected


def test_kb_base_1000_makes_si_decimal_and_keeps_iec_binary():
    assert units.parse_size("4k", kb_base=1000) == 4000
    assert units.parse_size("4KB", kb_base=1000) == 4000
    assert units.parse_size("4KiB", kb_base=1000) == 4096
    assert units.parse_size("1.5M", kb_base=1000) == 1_500_000
    with pytest.raises(UnitsError, match="kb_base"):
        units.parse_size("4k", kb_base=1001)


@pytest.mark.parametrize("bad", ["four", "-1k", "4q", "4Ki", "KiB", "", "1e3", "4 k b", True,
                                 None, 0, -5, 1.5, float("inf")])
def test_bad_sizes_are_one_error_type(bad):
    with pytest.raises(UnitsError) as exc:
        units.parse_size(bad, "block size")
    assert isinstance(exc.value, StorlabError) and isinstance(exc.value, ValueError)
    assert "block size" in str(exc.value) and "\n" not in str(exc.value)


def test_numbers_pass_and_rounding():
    assert units.to_number(-2.5) == -2.5  # a real factor's level, not a size
    assert units.parse_size("1.1k") == 1126  # suffixed decimals round to the nearest byte
    assert units.parse_size(0, allow_zero=True) == 0
    assert units.parse_size(4096.0) == 4096


def test_rates():
    assert units.parse_rate("100MB/s") == 100 << 20
    assert units.parse_rate("1.5GiB/sec") == 1.5 * (1 << 30)
    assert units.parse_rate("500k") == 512_000
    with pytest.raises(UnitsError, match="rate"):
        units.parse_rate("fast/s")


def test_mixes():
    assert units.parse_size_mix("16k:0.8,1MiB:0.2") == {16384: 0.8, 1 << 20: 0.2}
    assert units.parse_size_mix({"4k": 1, "4096": 3}) == {4096: 1.0}  # weights add up
    assert units.parse_size_mix("4k:0.25,64KB:0.75", exact=True) == {4096: 0.25, 65536: 0.75}
    with pytest.raises(UnitsError, match="appears twice"):
        units.parse_size_mix("4k:0.5,4KiB:0.5", exact=True)
    with pytest.raises(UnitsError, match="sum to 1.1"):
        units.parse_size_mix("4k:0.8,64k:0.3", exact=True)
    assert units.parse_op_mix("GET:3, put:1", ("get", "put", "delete")) == {
        "get": 0.75, "put": 0.25, "delete": 0.0}
    with pytest.raises(UnitsError, match="operations are"):
        units.parse_op_mix("list:1", ("get", "put"))


def test_format_size_round_trips():
    for b in (512, 4096, 65536, 1 << 20, 3 << 30, 1572864):
        assert units.parse_size(units.format_size(b)) == b


def test_fio_value_sends_iec_sizes_as_bytes():
    # fio's default mode reads "4KiB" as 4000; storlab means 4096, so fio gets the bytes.
    assert units.fio_value("4KiB") == "4096"
    assert units.fio_value("1.5M") == "1572864"  # fio 3.33 reads "1.5M" as 1 byte
    assert units.fio_value("4k") == "4k" and units.fio_value("randread") == "randread"
    assert units.fio_value("4k/50:64KiB/50") == "4k/50:64KiB/50"  # not one size: untouched


# ------------------------------------------------------------------ every input path
PATHS_CASES = ["4k", "4K", "4KB", "4KiB", "64KiB", "1M", "1MiB", "1.5M"]


@pytest.mark.parametrize("text", PATHS_CASES)
def test_every_input_path_reads_the_same_bytes(text, tmp_path: Path):
    want = units.parse_size(text)
    got: dict[str, float] = {}

    # space YAML: a range and a level
    from storlab.space import Space
    p = tmp_path / "space.yaml"
    p.write_text(yaml.safe_dump({"factors": [
        {"name": "bs", "kind": "integer", "range": [text, "8M"]},
        {"name": "fs", "kind": "ordinal", "values": [text, "16M"]}]}))
    space = Space.from_yaml(p)
    got["space range"] = space.factors[0].range[0]
    got["space level"] = units.to_number(space.factors[1].values[0])

    # simulator: cluster file and --set override
    from storlab.sim.model import build_model, draw_requests
    from storlab.sim.spec import load_cluster
    raw = {"name": "u", "swift": {"part_power": 6},
           "nodes": [{"role": "proxy", "count": 1},
                     {"role": "storage", "count": 3, "disks": {"type": "ssd_s3700", "count": 1}}],
           "workload": {"object_size": text, "objects": 10, "requests": 10}}
    c = tmp_path / "c.yaml"
    c.write_text(yaml.safe_dump(raw))
    got["sim file"] = int(draw_requests(build_model(load_cluster(c)), 5).size[0])
    c2 = tmp_path / "c2.yaml"
    c2.write_text(yaml.safe_dump({**raw, "workload": {"objects": 10, "requests": 10}}))
    spec = load_cluster(c2, overrides={"object_size": text})
    got["sim --set"] = int(draw_requests(build_model(spec), 5).size[0])

    # object-store load (runner options and the generator's own spec)
    from storlab.campaign.runners.objectstore import load_spec_from
    got["objectstore"] = next(iter(load_spec_from({"object_size": text}).sizes))

    # estimate: fit from a table, measure plan, size mix
    from storlab.estimate import fit_table
    from storlab.estimate.measure import MeasurePlan
    df = pd.DataFrame({"size": [text, text], "read_pct": [0, 100],
                       "read_iops": [0.0, 100.0], "write_iops": [80.0, 0.0]})
    got["estimate fit"] = fit_table(df).sizes[0]
    got["estimate measure"] = MeasurePlan.build(sizes=text).sizes[0]
    got["estimate mix"] = next(iter(units.parse_size_mix(f"{text}:1", exact=True)))

    # postmark options
    from storlab.campaign.runners.postmark import PostmarkRunner
    script = PostmarkRunner(min_size=text, max_size=text).script({}, tmp_path)
    got["postmark"] = int(next(line for line in script.splitlines()
                               if line.startswith("set size")).split()[2])

    # fio: the value fio is given means the same bytes to fio's default kb_base=1024
    from storlab.campaign.runners.fio import FioRunner
    opts = FioRunner().job_options({"bs": text}, tmp_path, check=False)
    got["fio"] = _fio_reads(opts["bs"])

    assert got == {k: want for k in got}


def _fio_reads(value: str) -> int:
    """The bytes of one I/O when fio itself is given `bs=value` (null engine, one I/O)."""
    import json
    import subprocess
    out = subprocess.run(["fio", "--name=u", f"--bs={value}", "--size=64M", "--rw=read",
                          "--filename=/dev/null", "--ioengine=null", "--number_ios=1",
                          "--output-format=json"], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return json.loads(out[out.index("{"):])["jobs"][0]["read"]["io_bytes"]


def test_tools_wrap_the_error_with_their_own_type():
    from storlab.campaign.runners.objload import LoadError, parse_sizes
    from storlab.errors import EstimateError
    from storlab.estimate.cells import size_bytes
    with pytest.raises(LoadError, match="not a size"):
        parse_sizes("16 parsecs")
    with pytest.raises(EstimateError, match="I/O size"):
        size_bytes("4q")


def test_fio_time_options_keep_their_minutes(tmp_path):
    """"1.5m" is 1.5 minutes to fio's runtime, not 1.5 MiB: time options are not converted."""
    from storlab.campaign.runners.fio import FioRunner

    r = FioRunner(rw="read", bs="4KiB", size="1.5M", runtime="1.5m", ramp_time="2.5s",
                  filename=str(tmp_path / "f"))
    opts = r.job_options({}, tmp_path, check=False)
    assert opts["bs"] == "4096" and opts["size"] == "1572864"
    assert opts["runtime"] == "1.5m" and opts["ramp_time"] == "2.5s"
