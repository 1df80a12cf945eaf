from parse import to_number


def sum_by(records, key, value):
    """The sum of `value` for each distinct `key`, in order of first appearance."""
    sums = {}
    for record in records:
        sums[record[key]] = sums.get(record[key], 0.0) + to_number(record[value])
    return sums
