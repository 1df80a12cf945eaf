from parse import rows
from totals import sum_by


def summary(csv_text):
    """One line per region with its revenue, largest first."""
    sums = sum_by(rows(csv_text), "region", "revenue")
    ranked = sorted(sums.items(), key=lambda kv: -kv[1])
    return [f"{region}: {amount:.2f}" for region, amount in ranked]
