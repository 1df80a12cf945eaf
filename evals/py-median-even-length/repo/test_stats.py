import stats


def test_mean():
    assert stats.mean([1, 2, 3, 4]) == 2.5


def test_median_odd():
    assert stats.median([5, 1, 3]) == 3


def test_median_even():
    assert stats.median([4, 1, 3, 2]) == 2.5


def test_median_two():
    assert stats.median([10, 20]) == 15


def test_median_of_nothing():
    try:
        stats.median([])
    except ValueError:
        return
    raise AssertionError("median([]) should raise ValueError")
