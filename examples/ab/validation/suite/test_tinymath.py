import unittest

import tinymath


class Total(unittest.TestCase):
    def test_small(self):
        self.assertEqual(tinymath.total(3), 14)

    def test_zero(self):
        self.assertEqual(tinymath.total(0), 0)

    def test_large(self):
        self.assertEqual(tinymath.total(1000), 333833500)
