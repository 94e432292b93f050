"""Fixtures shared by the trainer tests: a two-question task over the mixed corpus, and a reward that alternates."""

import json
import shutil

import pytest

QUESTIONS = [
    {
        "id": "staff",
        "question": "How many people does the Tampere factory employ?",
        "answer": ["85"],
        "evidence": [{"file": "tampere_factory_notes.md"}],
    },
    {
        "id": "revenue",
        "question": "What was total revenue in 2025?",
        "answer": ["48.6 million dollars"],
        "evidence": [{"file": "aurora_annual_report_2025.pdf", "page": 1}],
    },
]


@pytest.fixture
def questions() -> list[dict]:
    """The task's questions, as written to its dataset."""
    return QUESTIONS


@pytest.fixture
def task(mixed_corpus, mixed_index, tmp_path):
    qs = tmp_path / "qs.jsonl"
    qs.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    idx = tmp_path / "idx"
    shutil.copytree(mixed_index, idx)
    return {"dataset": f"jsonl:{qs}", "corpus": str(mixed_corpus), "index": str(idx)}


@pytest.fixture
def parity_reward(monkeypatch):
    """A random model never answers, so every reward would be 0 and every advantage too: instead the
    trajectories of each group of two are scored 1 and 0 in turn (deterministic, and the same after a resume)."""
    import rl.rollout

    calls = iter(range(10_000))
    monkeypatch.setattr(
        rl.rollout, "score", lambda trace, item, reward="vimrag", judge=None: float(next(calls) % 2 == 0)
    )
