from tiers import TIERS


def discount_percent(subtotal):
    for threshold, percent in TIERS:
        if subtotal > threshold:
            return percent
    return 0


def total(subtotal):
    """The amount to pay, in cents, rounded down."""
    return subtotal * (100 - discount_percent(subtotal)) // 100
