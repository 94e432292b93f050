"""Fakes the agent tests share."""

from retrieval.units import Hit


class Fixed:
    """A retriever that returns the same ranked units (at most k) for every query, scores falling by 0.1."""

    ocr = None

    def __init__(self, units):
        self.units = units

    def search(self, query, k=3, filters=None, mode="hybrid"):
        return [Hit(u, 1.0 - 0.1 * i, rank=i + 1) for i, u in enumerate(self.units[:k])]
