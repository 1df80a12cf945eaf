def clamp(value, low, high):
    """`value` limited to the range [low, high]."""
    if low > high:
        raise ValueError("low > high")
    return max(low, min(value, high))
