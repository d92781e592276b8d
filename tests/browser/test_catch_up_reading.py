"""The browser checks' reading of catch-up figures (``tests/browser/catch_up.py``): what counts as two
figures that disagree."""

import pytest

from tests.browser.catch_up import disagree, read_catch_up

FROM_START = "2 min 51 s from the start of the rescale (2 min after the first batch on the new configuration)"


@pytest.mark.parametrize("a, b, expected", [
    (("171 s from the start of the rescale",), ("not caught up within the verification window",), True),
    (("not yet",), ("14 s",), True),
    (("–",), ("not yet",), False),
    ((FROM_START,), ("2 min after the first batch on the new configuration (2 min 51 s from the start of the "
                     "rescale)",), False),
    ((FROM_START,), ("2 min 51 s",), False),
    ((FROM_START,), ("3 min 40 s",), True),
    (("45 s from the start of the rescale",), ("28 s", "catch-up, from the end of the execution"), False),
    (("45 s from the start of the rescale",), ("28 s", "Catch-up after the restart"), True),
    (("45 s",), ("28 s", "catch-up, from the end of the execution"), True),
])
def test_two_catch_up_figures_disagree_when_they_cannot_both_be_true(a, b, expected):
    assert disagree(read_catch_up(*a), read_catch_up(*b)) is expected


def test_a_figure_without_a_duration_or_not_yet_is_unreadable():
    assert read_catch_up("soon") is None
    assert read_catch_up("1 h 5 min").seconds == {"unstated": (3900.0, 60.0)}
