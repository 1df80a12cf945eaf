import unittest

from articles import Article


class Tags(unittest.TestCase):
    def test_a_tagged_article(self):
        self.assertEqual(Article("A").tag("rust", "git").tags, ["rust", "git"])

    def test_b_untagged_article(self):
        self.assertEqual(Article("B").tags, [])

    def test_c_given_tags_are_copied(self):
        given = ["x"]
        article = Article("C", given).tag("y")
        self.assertEqual(article.tags, ["x", "y"])
        self.assertEqual(given, ["x"])


if __name__ == "__main__":
    unittest.main()
