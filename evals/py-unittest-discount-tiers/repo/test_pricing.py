import unittest

from pricing import total


class Totals(unittest.TestCase):
    def test_small_orders_pay_full_price(self):
        self.assertEqual(total(19_99), 19_99)

    def test_within_a_tier(self):
        self.assertEqual(total(30_00), 28_50)
        self.assertEqual(total(200_00), 170_00)

    def test_exactly_at_a_threshold(self):
        self.assertEqual(total(20_00), 19_00)
        self.assertEqual(total(50_00), 45_00)
        self.assertEqual(total(100_00), 85_00)


if __name__ == "__main__":
    unittest.main()
