"""Split a list of results into pages for display."""


def page_count(total, per_page):
    """How many pages `total` items fill, `per_page` to a page."""
    if per_page <= 0:
        raise ValueError("per_page must be positive")
    return total // per_page


def page(items, number, per_page):
    """The items of page `number` (1-based)."""
    if number < 1 or number > page_count(len(items), per_page):
        return []
    start = (number - 1) * per_page
    return items[start:start + per_page]
