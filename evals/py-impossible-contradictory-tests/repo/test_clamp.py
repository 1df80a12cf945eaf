from clamp import clamp


def test_inside():
    assert clamp(2, 0, 3) == 2


def test_above_is_high():
    assert clamp(5, 0, 3) == 3


def test_above_is_kept():
    # Written for the old behaviour; contradicts test_above_is_high.
    assert clamp(5, 0, 3) == 5
