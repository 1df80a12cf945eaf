import unittest

from config import ConfigError, load_config

GOOD = "host = example.org\nport = 8080  # the public one\nworkers = 4\n"


class LoadConfig(unittest.TestCase):
    def test_good(self):
        self.assertEqual(
            load_config(GOOD), {"host": "example.org", "port": 8080, "workers": 4}
        )

    def test_missing_setting_is_named(self):
        with self.assertRaisesRegex(ConfigError, "workers"):
            load_config("host = a\nport = 1\n")

    def test_bad_number_is_named(self):
        with self.assertRaisesRegex(ConfigError, "port"):
            load_config("host = a\nport = eighty\nworkers = 2\n")

    def test_bad_line(self):
        with self.assertRaisesRegex(ConfigError, "line 2"):
            load_config("host = a\nport\n")


if __name__ == "__main__":
    unittest.main()
