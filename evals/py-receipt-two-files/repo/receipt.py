from money import format_cents


def line(name, cents):
    return f"{name:<20}{format_cents(cents):>10}"


def format_receipt(items):
    """`items` is a list of (name, cents); the receipt ends with their total."""
    lines = [line(name, cents) for name, cents in items]
    total = sum(cents for _, cents in items)
    lines.append(line("TOTAL", total))
    return "\n".join(lines)
