"""Questions over the generated mixed corpus (tests/conftest.py's `mixed_corpus`: a PDF, a note, a poster and a
video), with gold answers and evidence, and the task folder a run reads them from. Shared by the eval and rl
tests."""

import json
import shutil
from pathlib import Path

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
    {
        "id": "battery",
        "question": "How long is the runtime after the battery upgrade?",
        "answer": ["14 hours"],
        "evidence": [{"file": "product_update.mp4", "time": [10, 20]}],
    },
    {
        "id": "pilot",
        "question": "How many customers can join the pilot?",
        "answer": ["12"],
        "evidence": [{"file": "logimat_poster.png"}],
    },
]


def write_task(folder: Path, questions: list[dict], mixed_index: Path) -> tuple[Path, Path]:
    """(the questions as a JSONL dataset, a private copy of the mixed index) under `folder`."""
    qs = folder / "qs.jsonl"
    qs.write_text("".join(json.dumps(q) + "\n" for q in questions))
    index = folder / "idx"
    shutil.copytree(mixed_index, index)
    return qs, index
