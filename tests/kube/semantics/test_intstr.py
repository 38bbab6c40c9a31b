"""`IntOrString` values: apimachinery's GetScaledValueFromIntOrPercent and the valid forms."""

from __future__ import annotations

import pytest

from runtimekit.kube.semantics.intstr import int_or_percent, is_zero, scaled_value


@pytest.mark.parametrize(
    ("value", "total", "up", "down"),
    [
        pytest.param(3, 10, 3, 3, id="a count is taken as is"),
        pytest.param("25%", 10, 3, 2, id="a quarter of 10"),
        pytest.param("100%", 7, 7, 7, id="all"),
        pytest.param("0%", 7, 0, 0, id="none"),
        pytest.param("50%", 0, 0, 0, id="of nothing"),
    ],
)
def test_scaled_value_rounds_up_or_down(value: int | str, total: int, up: int, down: int) -> None:
    assert scaled_value(value, total, round_up=True) == up
    assert scaled_value(value, total, round_up=False) == down


@pytest.mark.parametrize("value", ["5", "five%", "-5%", "5.5%", True, 1.5, None])
def test_anything_but_an_int_or_a_percentage_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="invalid value for IntOrString"):
        int_or_percent(value)
    with pytest.raises(ValueError, match="invalid value for IntOrString"):
        scaled_value(value, 10, round_up=True)


def test_zero_fenceposts() -> None:
    assert is_zero(0)
    assert is_zero("0%")
    assert not is_zero(False)
    assert not is_zero("0")
