"""An executor spec's N (`parallel:N`, `--executor parallel:N`) is ASCII digits: a digit
str.isdigit() takes but int() does not (latin-1's `²`) is refused in one line, as any
malformed N, not a ValueError traceback."""

from __future__ import annotations

import pytest

from storlab.campaign.executors import make_executor, requested_width
from storlab.campaign.sweep_campaign import check_executor
from storlab.errors import CampaignError, SimError


@pytest.mark.parametrize("n", ["\u00b2", "1\u00b3", "\u0663"])  # ², 1³, Arabic-Indic 3
def test_a_non_ascii_digit_n_is_refused_in_one_line(n: str) -> None:
    spec = f"parallel:{n}"
    assert requested_width(spec) is None
    with pytest.raises(CampaignError, match="parallel:N needs a positive N"):
        make_executor(spec)
    with pytest.raises(SimError, match="parallel:N needs a positive N"):
        check_executor(spec)


def test_an_ascii_n_still_counts() -> None:
    assert requested_width("parallel:3") == 3
    assert make_executor("parallel:2") is not None
    check_executor("parallel:2")
