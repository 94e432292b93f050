"""BM25 over the units' extracted text (bm25s, Lucene scoring), with English stemming and stop words.

One `Bm25Index` is built from the store's texts when a retriever opens; building is fast (about a
second for 10^4 pages), so it is derived state and never the source of truth.
"""

from __future__ import annotations

import re

import numpy as np

_TOKEN = re.compile(r"\w+(?:[.,']\w+)*", re.UNICODE)


class Tokenizer:
    """Lower-case word tokens, English stop words removed, Snowball-stemmed (PyStemmer when installed)."""

    def __init__(self) -> None:
        from bm25s.stopwords import STOPWORDS_EN

        self.stop = set(STOPWORDS_EN)
        try:
            import Stemmer

            self._stem = Stemmer.Stemmer("english").stemWords
        except ImportError:  # stemming is a quality nicety, not a requirement
            self._stem = None

    def __call__(self, text: str) -> list[str]:
        toks = [t for t in _TOKEN.findall(text.lower()) if t not in self.stop]
        return self._stem(toks) if self._stem else toks

    def stem(self, word: str) -> str:
        """One word as `__call__` stems it (lower-cased), stop words included: for matching word by word."""
        w = word.lower()
        return self._stem([w])[0] if self._stem else w


class Bm25Index:
    def __init__(self, texts: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        import bm25s

        self.tokenize = Tokenizer()
        self.n = len(texts)
        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        if self.n:
            corpus = [self.tokenize(t) or ["\u2205"] for t in texts]  # an empty doc still needs one token
            self._bm25.index(corpus, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document, (n,) float32; all zeros when no query term is in the vocabulary."""
        if not self.n:
            return np.zeros(0, dtype=np.float32)
        toks = [t for t in self.tokenize(query) if t in self._bm25.vocab_dict]
        if not toks:
            return np.zeros(self.n, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(toks), dtype=np.float32)  # (n,)
