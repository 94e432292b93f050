"""The embedded default answers plain questions about the bundled corpus, as a new user asks them.

Runs the commands docs/evaluation.md gives for them (`vimrag eval --dataset
jsonl:assets/questions_plain.jsonl --corpus assets/corpus --backend embedded`, and `--dataset demo`) with the
real default models: MiniLM retrieval, OCR, SmolLM2. Marks (issue 31): all 24 plain questions and all 11 demo questions.
Every answer must be a short phrase read from the sentence its trace cites, never that sentence or a heading.
"""

import json
from pathlib import Path

import pytest

from agent.reader.extract import NOT_ANSWERABLE
from app.cli import main

REPO = Path(__file__).resolve().parents[2]


def run(dataset: str, index: Path, out: Path) -> list[dict]:
    args = ["eval", "--dataset", dataset, "--backend", "embedded", "--index", str(index), "--out", str(out), "--quiet"]
    if dataset.startswith("jsonl:"):
        args += ["--corpus", str(REPO / "assets" / "corpus")]
    assert main(args) == 0
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def check_grounded(rows: list[dict], out: Path) -> None:
    for r in rows:
        pred = r["pred"] or ""
        if pred == NOT_ANSWERABLE:
            continue
        trace = json.loads((out / r["trace"]).read_text())
        sup = trace["support"]
        assert sup and sup["sentence"] and sup["citation"], r["id"]
        assert len(pred.split()) <= 8 and pred != sup["sentence"], f"{r['id']}: a sentence, not a phrase: {pred!r}"
        if sup.get("path") == "table":  # its cells are cited; a lookup's value is one of them, with the table's scale
            value = pred.split()[0]
            assert sup["table"]["cells"] and (value in sup["sentence"] or sup["table"]["op"] != "cell"), r["id"]
            continue
        assert pred.lower() in sup["sentence"].lower() or sup["answer_type"] in ("date", "list"), r["id"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "dataset,mark", [("jsonl:" + str(REPO / "assets" / "questions_plain.jsonl"), 1.0), ("demo", 1.0)]
)
def test_embedded_default_answers_plain_questions(dataset, mark, bundled_index, tmp_path):
    rows = run(dataset, bundled_index, tmp_path / "run")
    acc = sum(r["score"] for r in rows) / len(rows)
    wrong = [(r["id"], r["pred"], r["gold"][0]) for r in rows if r["score"] < 1]
    assert acc >= mark, f"accuracy {acc:.2f} < {mark:.2f}; wrong: {wrong}"
    check_grounded(rows, tmp_path / "run")


def test_plain_questions_cover_the_asked_kinds():
    rows = [json.loads(line) for line in (REPO / "assets" / "questions_plain.jsonl").read_text().splitlines()]
    assert len(rows) >= 20
    kinds = {r["answer_type"] for r in rows}
    assert {"number", "percent", "date", "person", "place", "list"} <= kinds
    sources = " ".join(r["source"] for r in rows)
    for where in ("pdf", "notes", "poster", "video", "before", "after"):
        assert where in sources, where


@pytest.mark.slow
def test_several_protocols_in_one_command_make_one_comparison(bundled_index, tmp_path, capsys):
    """`vimrag eval --protocol a,b` runs each protocol over one index and writes one comparison of accuracy
    beside turns, tokens and time (issue 32)."""
    out = tmp_path / "all"
    args = ["eval", "--dataset", "demo", "--backend", "embedded", "--index", str(bundled_index)]
    assert main(args + ["--protocol", "vanilla,memagent", "--out", str(out), "--quiet", "--limit", "3"]) == 0
    md = (out / "compare" / "compare.md").read_text()
    rows = [ln for ln in md.splitlines() if ln.startswith("| vanilla") or ln.startswith("| memagent")]
    assert len(rows) == 2 and "tokens / q" in md and "peak context" in md
    assert (out / "compare" / "tokens_vs_accuracy.png").stat().st_size > 1000
    assert all((out / p / "predictions.jsonl").is_file() for p in ("vanilla", "memagent"))
    assert main(args + ["--protocol", "vimrag,nope", "--out", str(tmp_path / "x"), "--quiet"]) != 0
    assert not (tmp_path / "x").exists()  # refused before any run
    assert "unknown protocol(s) nope" in capsys.readouterr().err


def test_protocol_lists_parse_and_refuse_unknown_names():
    from agent.protocols import names
    from app.evaluate import _protocols

    assert _protocols("all") == list(names())
    assert _protocols(" vimrag , mem1,vimrag") == ["vimrag", "mem1"]
    assert _protocols("") == []
    with pytest.raises(ValueError, match="unknown protocol.*nope.*choose from"):
        _protocols("vimrag,nope")
