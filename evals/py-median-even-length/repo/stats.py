"""Small descriptive statistics."""


def mean(values):
    if not values:
        raise ValueError("mean of no values")
    return sum(values) / len(values)


def median(values):
    """The middle value of `values` (which need not be sorted)."""
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
