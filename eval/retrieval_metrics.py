"""Retrieval metrics against gold evidence: recall@k, NDCG@k (binary relevance), MRR. Pure functions.

`ranked` is the list of retrieved ids, best first; `gold` the set of relevant ids. Ids are anything
hashable, e.g. ("report.pdf", 5) for a page.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence


def recall_at_k(ranked: Sequence[Hashable], gold: set, k: int) -> float:
    """Fraction of the gold items found in the top k.

    >>> recall_at_k(["a", "b", "c"], {"a", "c", "z"}, 2)
    0.3333333333333333
    """
    if not gold:
        raise ValueError("recall is undefined without gold items")
    return len(set(ranked[:k]) & gold) / len(gold)


def ndcg_at_k(ranked: Sequence[Hashable], gold: set, k: int) -> float:
    """Normalised discounted cumulative gain with binary relevance (Jarvelin & Kekalainen, 2002).

    >>> round(ndcg_at_k(["x", "a"], {"a"}, 5), 4)  # one hit at rank 2: 1/log2(3)
    0.6309
    """
    if not gold:
        raise ValueError("NDCG is undefined without gold items")
    dcg = sum(1.0 / math.log2(i + 2) for i, r in enumerate(ranked[:k]) if r in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(gold))))
    return dcg / ideal


def mrr(ranked: Sequence[Hashable], gold: set, k: int | None = None) -> float:
    """Reciprocal rank of the first gold item (0 if none within k).

    >>> mrr(["x", "y", "a"], {"a"})
    0.3333333333333333
    """
    for i, r in enumerate(ranked[:k] if k else ranked):
        if r in gold:
            return 1.0 / (i + 1)
    return 0.0
