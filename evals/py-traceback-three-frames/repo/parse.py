"""Reading the numbers of a CSV export."""


def to_number(text):
    """A number as the export writes it: `12`, `-3.5`, `1,234.50`, or empty for zero."""
    text = text.strip()
    if not text:
        return 0.0
    return float(text)


def rows(csv_text):
    lines = [l for l in csv_text.splitlines() if l.strip()]
    header = [h.strip() for h in lines[0].split(";")]
    return [dict(zip(header, (c.strip() for c in l.split(";")))) for l in lines[1:]]
