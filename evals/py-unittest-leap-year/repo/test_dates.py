import unittest

from dates import days_in_month, is_leap, next_day


class LeapYears(unittest.TestCase):
    def test_common_years(self):
        for year in (1900, 2019, 2100):
            self.assertFalse(is_leap(year), year)

    def test_leap_years(self):
        for year in (1996, 2000, 2024):
            self.assertTrue(is_leap(year), year)


class Days(unittest.TestCase):
    def test_february(self):
        self.assertEqual(days_in_month(2024, 2), 29)
        self.assertEqual(days_in_month(2023, 2), 28)

    def test_next_day(self):
        self.assertEqual(next_day(2024, 2, 28), (2024, 2, 29))
        self.assertEqual(next_day(2023, 2, 28), (2023, 3, 1))
        self.assertEqual(next_day(2023, 12, 31), (2024, 1, 1))


if __name__ == "__main__":
    unittest.main()
