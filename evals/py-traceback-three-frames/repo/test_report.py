from report import summary

SMALL = """region;revenue
north;10
south;20.5
north;-2
"""

EXPORT = """region;revenue
north;1,234.50
south;980
east;
south;1,000
"""


def test_small_export():
    assert summary(SMALL) == ["south: 20.50", "north: 8.00"]


def test_real_export():
    assert summary(EXPORT) == ["south: 1980.00", "north: 1234.50", "east: 0.00"]
