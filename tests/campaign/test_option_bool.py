"""A runner option that gates safety is a real YAML bool: `bool("false")` is True, so a
quoted "false" or "no" must be refused, not read as permission."""

from __future__ import annotations

import pytest

from storlab.campaign.runners import make_runner
from storlab.errors import CampaignError


@pytest.mark.parametrize("kind,options,name", [
    ("ceph", {}, "allow_destructive"),
    ("fio", {}, "allow_destructive"),
    ("command", {"command": "echo hi"}, "shell"),
])
@pytest.mark.parametrize("value", ["false", "no", 0, 1, None])
def test_quoted_bool_refused(kind: str, options: dict, name: str, value: object) -> None:
    with pytest.raises(CampaignError, match=f"^option {name}: {value!r} must be "
                                            "true or false$"):
        make_runner(kind, {**options, name: value})

