"""No answer of the embedded reader is a heading or a document title, over every dev question.

The reader gets what `eval.bench_extract` gives it (the gold pages' text, or BM25's top 3 pages of the
document for "Not answerable" questions). It runs on rules alone here, without SmolLM2 and MiniLM (which
only reorder candidates; titles never enter the pool and a heading line never is one), so all 543 fit in
the suite's time; `python -m eval.bench_extract` counts heading answers with both models loaded.
Skips without ../shared/data.
"""

import re

import pytest

from agent.reader.extract import NOT_ANSWERABLE, Passage, read_answer


@pytest.mark.slow
def test_no_dev_answer_is_a_heading_or_title(shared_data):
    from eval.bench_extract import headings, inputs
    from eval.datasets import load_dataset

    pairs = inputs(load_dataset("mmlongbench-doc").items, {})
    assert len(pairs) > 400
    bad, answered = [], 0
    for it, pages in pairs:
        r = read_answer(it.question, [Passage(t, f"{it.doc} p.{p}", modality="page", page=p) for p, t in pages])
        if r.answer == NOT_ANSWERABLE:
            continue
        answered += 1
        heads = headings([t for _, t in pages])
        heads.add(re.sub(r"[_-]+", " ", it.doc.rsplit(".", 1)[0]).lower())
        if r.answer.strip().lower() in heads:
            bad.append((it.id, r.answer))
    assert answered > 100  # the check means something only if the reader answers
    assert not bad, f"{len(bad)} answers are headings or titles: {bad[:10]}"
