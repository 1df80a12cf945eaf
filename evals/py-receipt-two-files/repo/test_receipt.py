from money import format_cents
from receipt import format_receipt

ITEMS = [("coffee", 350), ("cake", 425)]


def test_dollars_by_default():
    assert format_cents(1234) == "$12.34"
    assert format_cents(-5) == "-$0.05"


def test_euros():
    assert format_cents(1234, "EUR") == "\u20ac12.34"


def test_receipt_in_dollars():
    assert format_receipt(ITEMS).splitlines()[-1] == "TOTAL                    $7.75"


def test_receipt_in_pounds():
    text = format_receipt(ITEMS, currency="GBP")
    assert text.splitlines() == [
        "coffee                   \u00a33.50",
        "cake                     \u00a34.25",
        "TOTAL                    \u00a37.75",
    ]
