from pages import page, page_count


def test_exact_pages():
    assert page_count(20, 10) == 2


def test_partial_last_page_counts():
    assert page_count(21, 10) == 3


def test_no_items_no_pages():
    assert page_count(0, 10) == 0


def test_last_page_holds_the_rest():
    items = list(range(25))
    assert page(items, 3, 10) == [20, 21, 22, 23, 24]


def test_past_the_end_is_empty():
    assert page(list(range(25)), 4, 10) == []
