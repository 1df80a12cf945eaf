"""Amounts of money are integers of cents."""

SYMBOLS = {"USD": "$", "EUR": "\u20ac", "GBP": "\u00a3"}


def format_cents(cents):
    """`1234` -> `$12.34`."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}$" + f"{cents // 100}.{cents % 100:02d}"
