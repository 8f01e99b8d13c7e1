"""What may reach root's `ceph config set` argv (no cluster needed): a value in the form
its Ceph type takes, a `who` that is a Ceph section; never a word the CLI reads as its own
option."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from storlab.campaign.runners.ceph import CephRunner
from storlab.campaign.runners.ceph_values import GRAMMARS, refused_value, refused_who
from storlab.errors import StorlabError

TYPES = [*GRAMMARS, "str", "addr", "uuid"]
SIGNED = ("int", "float")
_NEGATIVE = st.from_regex(r"-[0-9]{1,6}(\.[0-9]{1,3})?", fullmatch=True)


@given(kind=st.sampled_from(TYPES), rest=st.text(max_size=40),
       enum=st.lists(st.text(max_size=8), max_size=3))
def test_a_word_starting_with_a_dash_never_passes_unless_a_negative_number(kind, rest, enum):
    value = "-" + rest
    if refused_value(kind, enum, value) is None:
        assert kind in SIGNED and refused_value(kind, [], value.lstrip("-")) is None
        assert rest[:1].isdigit() or rest[:1] == "."


@given(value=_NEGATIVE)
def test_a_negative_number_passes_for_a_signed_type_only(value):
    assert refused_value("float", [], value) is None
    assert (refused_value("int", [], value) is None) == ("." not in value)
    for kind in ("uint", "size", "secs", "millisecs", "bool", "str"):
        assert refused_value(kind, [], value) is not None, kind


@pytest.mark.parametrize("kind,good,bad", [
    ("int", ["4", "+4", "-4", "0"], ["4K", "4.0", "--log_file=/x", " 4", "4\n", "0x10", ""]),
    ("uint", ["4", "+4"], ["-4", "4K", "4.5"]),
    ("float", ["0.5", "-.5", "1e-05", "3", "2.5E3"], ["nan", "inf", "1e", "--conf=/x", "1,5"]),
    ("bool", ["true", "False", "1", "0"], ["yes", "on", "-1", "--x"]),
    ("size", ["4096", "4K", "4Ki", "4KB", "1G", "1Gi", "512B"], ["4KiB", "4k", "-4K", "4 K"]),
    ("secs", ["30", "5m", "1h 30m", "2days", "1h30m"], ["-5", "5x", "--log_file=/x", "m"]),
    ("millisecs", ["250"], ["250ms", "-1", "1.5"]),
])
def test_each_type_takes_its_own_form_only(kind, good, bad):
    for v in good:
        assert refused_value(kind, [], v) is None, v
    for v in bad:
        why = refused_value(kind, [], v)
        assert why and "\n" not in why and repr(v) in why, v


def test_enum_and_free_form_strings():
    assert refused_value("str", ["wpq", "mclock_scheduler"], "wpq") is None
    assert "not one of" in (refused_value("str", ["wpq"], "fifo") or "")
    assert refused_value("str", [], "/var/lib/x") is None  # only with allow_destructive
    assert refused_value("str", [], "--log_file=/x") is not None
    assert refused_value("addr", [], "a\nb") is not None


@pytest.mark.parametrize("who", ["global", "mon", "mgr", "osd", "mds", "client", "osd.0",
                                 "client.rgw.gw1", "mds.a", "osd/class:ssd",
                                 "osd/host:node-1", "osd.3/rack:r1",
                                 "global/host:n1"])
def test_ceph_sections_and_masks_pass(who):
    assert refused_who(who) is None


@given(who=st.text(max_size=30))
def test_who_starting_with_a_dash_or_holding_odd_characters_is_refused(who):
    if refused_who(who) is None:
        assert who[:1] not in ("-", "") and not set(who) & set(" \n\t=,'\"\\")
        assert who.split("/")[0].split(".")[0] in ("global", "mon", "mgr", "osd", "mds",
                                                   "client")


@pytest.mark.parametrize("who", ["--log_file=/root/x", "-c/x", "osd.-x", "osd/host:-x",
                                 "global.x", "rgw", "osd ", "osd\n", ""])
def test_the_runner_refuses_a_bad_who_in_one_line(who):
    with pytest.raises(StorlabError) as exc:
        CephRunner(who={"osd_op_num_shards": who})
    msg = str(exc.value)
    assert "\n" not in msg and "who.osd_op_num_shards" in msg and repr(who) in msg
