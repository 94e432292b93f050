"""Fusing ranked lists, and ViDoRAG's dynamic top-k.

Fusion methods (all work on per-method {unit row: score} dicts):
- "rrf": reciprocal rank fusion, score = sum_m w_m / (k + rank_m) with k = 60 (Cormack et al., SIGIR 2009).
  Rank-based, so BM25's unbounded scores and cosine similarities need no calibration.
- "minmax": min-max normalise each method's candidate scores to [0, 1], then a weighted sum.
Missing candidates contribute nothing to RRF and 0 to minmax.
"""

from __future__ import annotations

import numpy as np

RRF_K = 60


def fuse(
    scores: dict[str, dict[int, float]],
    method: str = "rrf",
    weights: dict[str, float] | None = None,
    rrf_k: int = RRF_K,
) -> dict[int, float]:
    weights = weights or {}
    out: dict[int, float] = {}
    for name, s in scores.items():
        w = weights.get(name, 1.0)
        if not s or w == 0:
            continue
        if method == "rrf":
            ranked = sorted(s.items(), key=lambda kv: -kv[1])
            for rank, (uid, _) in enumerate(ranked, start=1):
                out[uid] = out.get(uid, 0.0) + w / (rrf_k + rank)
        elif method == "minmax":
            vals = np.fromiter(s.values(), dtype=np.float64)
            lo, hi = float(vals.min()), float(vals.max())
            span = hi - lo or 1.0
            for uid, v in s.items():
                out[uid] = out.get(uid, 0.0) + w * (v - lo) / span
        else:
            raise ValueError(f"unknown fusion method {method!r}; use 'rrf' or 'minmax'")
    return out


def dynamic_top_k(scores: list[float], window: int = 20, min_k: int = 1, max_k: int = 10, seed: int = 0) -> int:
    """How many of the best `scores` (sorted descending) to keep, by ViDoRAG's Gaussian-mixture cut.

    A 2-component Gaussian mixture is fitted to the top-`window` scores; the results assigned to the
    component with the higher mean are kept, clamped to [min_k, max_k] (ViDoRAG, Wang et al. 2025, sec. 3.2).

    >>> dynamic_top_k([0.9, 0.88, 0.86, 0.2, 0.19, 0.18, 0.17, 0.16])
    3
    """
    top = np.asarray(sorted(scores, reverse=True)[:window], dtype=np.float64)
    if len(top) <= min_k:
        return len(top)
    if np.ptp(top) < 1e-9:  # all equal: nothing separates a high cluster
        return int(min(max_k, len(top)))
    from sklearn.mixture import GaussianMixture

    gm = GaussianMixture(n_components=2, random_state=seed, reg_covar=1e-6).fit(top[:, None])
    labels = gm.predict(top[:, None])
    high = int(np.argmax(gm.means_.ravel()))
    # The cut is the first result that falls out of the high cluster (scores are sorted, so that is the k).
    k = int(np.argmax(labels != high)) if (labels != high).any() else len(top)
    return int(np.clip(k, min_k, max_k))
