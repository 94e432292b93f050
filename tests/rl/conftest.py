"""Fixtures shared by the trainer tests: a two-question task over the mixed corpus, and a reward that alternates."""

import pytest

from tests.mixed_task import QUESTIONS as MIXED_QUESTIONS
from tests.mixed_task import write_task

QUESTIONS = MIXED_QUESTIONS[:2]  # a text note and a PDF page


@pytest.fixture
def questions() -> list[dict]:
    """The task's questions, as written to its dataset."""
    return QUESTIONS


@pytest.fixture
def task(mixed_corpus, mixed_index, tmp_path):
    qs, idx = write_task(tmp_path, QUESTIONS, mixed_index)
    return {"dataset": f"jsonl:{qs}", "corpus": str(mixed_corpus), "index": str(idx)}


@pytest.fixture
def parity_reward(monkeypatch):
    """A random model never answers, so every reward would be 0 and every advantage too: instead the
    trajectories of each question are scored 1 and 0 in turn. The count is per question, so each group of two holds
    a 1 and a 0 whatever order its episodes finish in (lockstep runs them on threads), and after a resume too."""
    import threading
    from collections import Counter

    import rl.rollout

    seen: Counter = Counter()
    lock = threading.Lock()

    def alternate(trace, item, reward="vimrag", judge=None) -> float:
        with lock:
            seen[item.id] += 1
            return float(seen[item.id] % 2 == 1)

    monkeypatch.setattr(rl.rollout, "score", alternate)
