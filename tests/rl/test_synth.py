"""`vimrag synth`: the offline question writer and its checks, the endpoint writer/verifier/teacher against a
scripted OpenAI-compatible server, crash safety under kill -9, and the synthesized set
used by `vimrag eval`, `vimrag sft` and `vimrag train`. ACC compiled by hand is tests/rl/test_synth_acc.py's.

The corpus (tests/synth_corpus.py) is written so that every offline rule has one statement to read."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rl.synth import checks, offline, statements
from rl.synth.questions import SynthConfig, SynthError, synth_questions
from tests.synth_corpus import make_synth_corpus
from tests.table_pdf import make_table_pdf

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """tests/synth_corpus.py's documents, and an annual report's income statement (tests/table_pdf.py) for the
    table rules."""
    root = make_synth_corpus(tmp_path_factory.mktemp("synth_corpus"))
    make_table_pdf(root / "northwind_2025.pdf")
    return root


@pytest.fixture(scope="module")
def index(corpus, tmp_path_factory):
    from retrieval.ingest import Indexer

    idx = tmp_path_factory.mktemp("synth_idx")
    Indexer(idx).index([corpus], progress=False)
    return idx


@pytest.fixture(scope="module")
def offline_run(index, tmp_path_factory):
    """A run that stops at its 16th kept item (text, layout, chart and table questions); one of 40 is the crash
    test's."""
    out = tmp_path_factory.mktemp("synth_q")
    card = synth_questions(SynthConfig(index=str(index), out=str(out), n=16, pairs=0.3), progress=False)
    return out, card


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


# -- the offline writer ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sentence, question, answer",
    [
        (
            "About six-in-ten Republicans (59%) say the economy is in good shape.",
            "What percentage of Republicans say the economy is in good shape?",
            "59%",
        ),
        (
            "Partisans differ: 83% of Democrats have confidence in Biden to deal with China, compared with 19% of "
            "Republicans.",
            "What percentage of Democrats have confidence in Biden to deal with China?",
            "83%",
        ),
        (
            "Among Hispanics, 45% say they expect some improvement in their finances.",
            "Among Hispanics, what percentage say they expect some improvement in their finances?",
            "45%",
        ),
        ("There are 14 stations on the northern line.", "How many stations are there on the northern line?", "14"),
        ("The campus has 12 libraries.", "How many libraries does the campus have?", "12"),
        ("The median age of residents was 38 in 2010.", "What was the median age of residents in 2010?", "38"),
        ("The Harbor Transit Panel was founded in 1998.", "In what year was the Harbor Transit Panel founded?", "1998"),
        (
            "A full charge of the scanner takes about 2 hours.",
            "How long does a full charge of the scanner take?",
            "2 hours",
        ),
        (
            "Press and hold the Up button for 3 seconds until the screen turns off.",
            "How long should you press and hold the Up button until the screen turns off?",
            "3 seconds",
        ),
        (
            "We report Intersection over Union (IoU) on every split.",
            "What does IoU stand for?",
            "Intersection over Union",
        ),
    ],
)
def test_offline_rules_ask_what_the_statement_answers(sentence, question, answer):
    drafts = statements.statement_drafts(sentence, {"source": "x.pdf", "page": 1, "name": "x.pdf"}, "text")
    assert [(d.question, d.answer) for d in drafts] == [(question, answer)]


@pytest.mark.parametrize(
    "sentence",
    [
        "This share rose to 45% of adults who say so.",  # leans on the sentence before
        "45% of them say the economy is good.",  # 'them'
        "There are 5 of these in it.",
        "Its revenue was 12 million dollars.",
        "In Proceedings of the Conference on Empirical Methods in Natural Language Processing (EMNLP).",  # a venue
    ],
)
def test_offline_rules_pass_over_statements_that_do_not_stand_alone(sentence):
    assert statements.statement_drafts(sentence, {"source": "x.pdf", "page": 1, "name": "x.pdf"}, "text") == []


def test_captions_contents_and_titles():
    unit = {"source": "/c/paper.pdf", "page": 4, "name": "paper.pdf", "doc_title": "Harbor Commuter Survey 2024"}
    toc = "Contents\n" + "\n".join(f"Chapter {i} Topic {i} ........ {i * 3}" for i in range(1, 3))
    toc += "\nIntroduction to the survey ........ 2\nCommuting by rail ........ 3\nSurvey methodology ........ 9"
    got = {(d.rule, d.question, d.answer) for d in offline.page_drafts(unit, toc, set(), deck=False)}
    assert (
        "contents",
        'According to the contents of "Harbor Commuter Survey 2024", on which page does "Survey methodology" begin?',
        "9",
    ) in got
    assert not any("Chapter" in q for _, q, _ in got)  # 'Chapter 1 Topic 1' is a numbering, not a section name
    cap = offline._caption_draft("Table 2: Accuracy of different models on GSM8K", unit)
    assert (cap.question, cap.answer, cap.type) == (
        "Which table reports accuracy of different models on GSM8K?",
        "Table 2",
        "layout",  # which table a caption names is layout: 'table' questions read cells (test_synth_tables.py)
    )
    assert offline._caption_draft("Figure 1: An overview of our pipeline", unit) is None  # a diagram: no chart
    assert offline.title_line("Charging the Scanner\nPress and hold the power button.") == "Charging the Scanner"
    assert offline.title_line("Most Significant Barriers to\nAdoption") == ""  # cut off
    assert offline.title_line("AN UNC OMM ON SENSE OF T HE\nx") == ""  # letters split by the text layer


def test_a_pair_joins_two_related_facts_into_one_two_hop_question():
    u1, u2 = ({"source": "/c/a.pdf", "page": p, "name": "a.pdf"} for p in (2, 5))
    a = statements.statement_drafts("There are 14 stations on the northern line.", u1, "text")[0]
    b = statements.statement_drafts("There are 9 depots on the northern line.", u2, "text")[0]
    pair = offline.pair_draft(a, b)
    assert (
        pair.question
        == "How many stations are there on the northern line, and how many depots are there on the northern line?"
    )
    assert (pair.answer, pair.hops, pair.type, pair.answer_format) == ("['14', '9']", 2, "multi-page", "List")
    assert offline.pair_draft(a, a) is None  # the same page twice is no pair
    c = statements.statement_drafts("The campus has 12 libraries.", u2, "text")[0]
    assert offline.pair_draft(a, c) is None  # unrelated facts are two questions, not one


# -- the checks --------------------------------------------------------------------------------------------
def test_checks_refuse_what_they_should():
    v = checks.OfflineVerifier()
    page = {"text": "The median commute was 34 minutes in 2024.", "cite": "survey.pdf p.4"}
    assert v.grounded("q", "34 minutes", "Str", [page])[0]
    ok, why = v.grounded("q", "43 minutes", "Str", [page])
    assert not ok and "does not print '43 minutes'" in why
    assert checks.leaked("Was the median commute 34 minutes?", "34 minutes", "Str") == "34 minutes"
    assert checks.leaked("What was the median commute?", "34 minutes", "Str") == ""
    two = [{"text": "12 libraries", "cite": "p.2"}, {"text": "14 stations", "cite": "p.5"}]
    assert v.grounded("q", "['12', '14']", "List", two)[0]
    assert not v.grounded("q", "['14', '12']", "List", two)[0]  # each part on its own page


# -- the offline run on a corpus ---------------------------------------------------------------------------
@pytest.mark.slow
def test_offline_run_keeps_grounded_items_of_several_types_and_writes_every_output(offline_run, corpus):
    out, card = offline_run
    kept = rows(out / "questions.jsonl")
    assert card["kept"] == len(kept) >= 10
    assert len({r["question_type"] for r in kept}) >= 4, card["by_type"]
    assert len({r["id"] for r in kept}) == len(kept)
    items = {r["item"]["id"]: r["item"] for r in rows(out / "journal.jsonl") if r.get("item")}
    for r in kept:  # every kept item passed every check, the grounded one included
        assert all(v["ok"] for v in items[r["id"]]["verdicts"].values()) and len(items[r["id"]]["verdicts"]) == 4
        text = " ".join(_unit_text(corpus, e) for e in r["evidence"])
        if r["question_type"] == "table":  # computed from cells: the cells are printed, the reader agreed
            assert items[r["id"]]["verdicts"]["grounded"]["reason"].startswith("the table reader reads")
            cells = [c.rsplit(": ", 1)[1] for c in r["sentence"].split(" | ")[-1].split("; ")]
            assert all(checks.printed(c, text) for c in cells), (r["question"], cells)
            continue
        for part in checks.answer_parts(r["answer"][0], r["answer_format"]):
            assert checks.printed(part, text), (r["question"], part)
    for r in rows(out / "rejected.jsonl"):
        assert r["reason"] and ":" in r["reason"]
    card_md = (out / "card.md").read_text()
    assert "Sample kept items" in card_md and "| type | items |" in card_md
    import pyarrow.parquet as pq

    # the columns VRAG-RL/scripts/hf_dataset_convert.py lines 47-93 write
    table = pq.read_table(out / "vrag_train.parquet").to_pylist()
    assert set(table[0]) == {"id", "data_source", "prompt", "ability", "reward_model", "extra_info"}
    first = next(t for t in table if t["id"] == kept[0]["id"])
    assert first["reward_model"] == {"style": "rule", "ground_truth": kept[0]["answer"][0]}
    assert first["prompt"][0]["content"].endswith("Question: " + kept[0]["question"])
    assert set(first["extra_info"]) == {
        "split", "index", "answer", "question", "content_type", "reason_type", "file_name", "reference_page"
    }  # fmt: skip


def _unit_text(corpus: Path, ev: dict) -> str:
    if ev["file"].endswith(".md"):
        return (corpus / ev["file"]).read_text()
    import pypdfium2 as pdfium

    return pdfium.PdfDocument(str(corpus / ev["file"]))[ev["page"] - 1].get_textpage().get_text_range()


@pytest.mark.slow
def test_a_rerun_of_a_finished_run_adds_nothing(offline_run, index):
    out, card = offline_run
    before = (out / "journal.jsonl").read_text()
    again = synth_questions(SynthConfig(index=str(index), out=str(out), n=16, pairs=0.3), progress=False)
    assert (out / "journal.jsonl").read_text() == before and again["kept"] == card["kept"]


@pytest.mark.slow
def test_the_synthesized_set_loads_in_vimrag_eval_and_is_scored(offline_run, corpus, index, tmp_path):
    from eval.runner import RunConfig, run_eval

    out, _ = offline_run
    run = run_eval(
        RunConfig.from_dict(
            {
                "dataset": f"jsonl:{out / 'questions.jsonl'}",
                "corpus": str(corpus),
                "index": str(index),
                "policy": {"backend": "embedded"},
                "out": str(tmp_path / "eval"),
            }
        ),
        progress=False,
    )
    preds = rows(run / "predictions.jsonl")
    assert len(preds) == len(rows(out / "questions.jsonl")) and not any(p["error"] for p in preds)
    assert sum(p["score"] for p in preds) >= 1  # the embedded default gets some right: the scorer ran on real rows


@pytest.mark.slow
def test_difficulty_is_a_reference_agents_pass_rate_written_into_the_set(offline_run, tmp_path):
    import shutil

    from agent.backends.base import PolicyConfig
    from agent.settings import AgentConfig
    from rl.synth.trajectories import synth_difficulty

    out = tmp_path / "q"
    shutil.copytree(offline_run[0], out)
    res = synth_difficulty(str(out), 2, PolicyConfig(backend="embedded"), AgentConfig(), progress=False)
    kept = rows(out / "questions.jsonl")
    rates = json.loads((out / "difficulty.json").read_text())["pass_rate"]
    assert res["k"] == 2 and res["items"] == len(kept) == len(rates)
    assert all(r["difficulty"] == rates[r["id"]] and r["difficulty"] in (0.0, 1.0) for r in kept)  # deterministic
    assert res["learnable"] == 0 and len(list((out / "difficulty").iterdir())) == 2
    card = json.loads((out / "card.json").read_text())
    assert "not measured" not in card["by_difficulty"] and sum(card["by_difficulty"].values()) == len(kept)


def test_bad_input_says_what_to_do(tmp_path, index):
    with pytest.raises(SynthError, match="no index at"):
        synth_questions(SynthConfig(index=str(tmp_path / "nope"), out=str(tmp_path / "o")), progress=False)
    with pytest.raises(SynthError, match="does not exist"):
        synth_questions(SynthConfig(corpus=str(tmp_path / "missing"), out=str(tmp_path / "o")), progress=False)
    with pytest.raises(ValueError, match="--n must be at least 1"):
        SynthConfig(index=str(index), n=0)
    from app.cli import main

    code = main(["synth", "questions", "--index", str(index), "--out", str(tmp_path / "u"), "-q", "--generator-url",
                 "http://127.0.0.1:9/v1", "--generator-model", "m"])  # fmt: skip
    assert code == 2  # 'generator endpoint ... cannot connect': one line, before the first page


# -- crash safety ------------------------------------------------------------------------------------------
# What is tested is the journal: the closed-book check reads with the reader alone (no SmolLM2, which only makes
# each verdict slower, ~1 s), in the killed run, its rerun and the uninterrupted run they are compared with.
NO_LM = "import rl.synth.checks as c\nc.OfflineVerifier._lm = lambda self: None\n"
SLOW_RUN = (
    NO_LM
    + """
import sys, time
import rl.synth.questions as q
real = q.verify
def slow(*a, **k):
    time.sleep(0.4)
    return real(*a, **k)
q.verify = slow
q.synth_questions(q.SynthConfig(index=sys.argv[1], out=sys.argv[2], n=40, pairs=0.3), progress=False)
"""
)


@pytest.mark.slow
def test_kill_9_mid_run_then_rerun_loses_and_duplicates_nothing(index, tmp_path, monkeypatch):
    monkeypatch.setattr(checks.OfflineVerifier, "_lm", lambda self: None)
    whole = tmp_path / "whole"
    synth_questions(SynthConfig(index=str(index), out=str(whole), n=40, pairs=0.3), progress=False)
    out = tmp_path / "killed"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", SLOW_RUN, str(index), str(out)], env=env, cwd=REPO)
    journal = out / "journal.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and (not journal.exists() or len(journal.read_text().splitlines()) < 4):
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    written = len(journal.read_text().splitlines())
    assert 4 <= written, "the run never got going"
    assert written < len((whole / "journal.jsonl").read_text().splitlines()), "the kill did not land mid-run"
    synth_questions(SynthConfig(index=str(index), out=str(out), n=40, pairs=0.3), progress=False)
    keys = [r["id"] for r in rows(journal)]
    assert len(keys) == len(set(keys))  # no slot twice
    assert [r["id"] for r in rows(out / "questions.jsonl")] == [r["id"] for r in rows(whole / "questions.jsonl")]


# -- endpoints: a scripted OpenAI-compatible server -----------------------------------------------------------
class ScriptedChat:
    """An OpenAI-compatible server that plays writer, verifier and teacher by reading its prompts: it writes a
    question on the page's title (every third reply malformed), says yes to grounding, does not know closed-book,
    answers NONE for other pages, and as a vrag teacher searches once, then answers from its answer key."""

    def __init__(self, key: dict[str, str]):
        self.key = key
        self.calls = 0
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                self._send({"data": [{"id": "scripted"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._send({"choices": [{"message": {"role": "assistant", "content": owner.reply(body)}}]})

            def _send(self, obj):
                data = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reply(self, body: dict) -> str:
        def text(m):
            c = m.get("content")
            return c if isinstance(c, str) else " ".join(p.get("text", "") for p in c if p.get("type") == "text")

        prompt = "\n".join(text(m) for m in body["messages"])
        with self.lock:
            self.calls += 1
            n = self.calls
        if "Write one question" in prompt:
            if n % 3 == 0:
                return "Sure! Here is a question about the page."  # no JSON: rejected with its reason
            cite = re.search(r"\[([^\]]+) p\.(\d+)\]", prompt)
            if cite is None:  # a text file has no page to ask about
                return json.dumps({"skip": "no page"})
            body_text = prompt.split(f"Text of {cite[0][1:-1]}:\n", 1)[1]
            title = body_text.strip().split("\n")[0]
            q = f"What is the heading at the top of page {cite[2]} of {cite[1]}?"
            return json.dumps({"question": q, "answer": title, "type": "layout", "hops": 1,
                               "evidence": [{"file": cite[1], "page": int(cite[2])}]})  # fmt: skip
        if "fully supported" in prompt:
            return "yes"
        if "without any document" in prompt:
            return "I do not know."
        if "reply NONE" in prompt:
            return "NONE"
        turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
        question = next((q for q in self.key if q in prompt), None)
        if turns == 0 or question is None:
            return "<think>I search first.</think><search>the page heading</search>"
        return f"<think>Found it.</think><answer>{self.key[question]}</answer>"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def endpoint_run(index, tmp_path_factory):
    out = tmp_path_factory.mktemp("synth_ep")
    server = ScriptedChat({})
    cfg = SynthConfig.from_dict(
        {
            "index": str(index),
            "out": str(out),
            "n": 6,
            "pairs": 0.0,
            "concurrency": 3,
            "generator": {"base_url": server.url},
        }  # fmt: skip
    )
    card = synth_questions(cfg, progress=False)
    yield out, card, server
    server.close()


@pytest.mark.slow
def test_the_endpoint_writer_and_verifier_run_end_to_end(endpoint_run):
    out, card, server = endpoint_run
    kept = rows(out / "questions.jsonl")
    assert card["kept"] == len(kept) >= 3 and card["malformed_replies"] >= 1
    assert all(r["source"] == "endpoint:scripted" and r["question"].startswith("What is the heading") for r in kept)
    notes = [r["note"] for r in rows(out / "journal.jsonl") if not r.get("item")]
    assert all(n for n in notes) and any(n.startswith("malformed generator reply") for n in notes)
    asked = [r["item"] for r in rows(out / "journal.jsonl") if r.get("item")]
    assert asked and all("said yes" in it["verdicts"]["grounded"]["reason"] for it in asked)  # the verifier's words


@pytest.mark.slow
def test_teacher_trajectories_sft_acc_and_train_on_the_synthesized_set(endpoint_run, corpus, index, tmp_path):
    from agent.backends.base import PolicyConfig
    from agent.settings import AgentConfig
    from rl.sft import load_examples, train_sft
    from rl.synth.trajectories import synth_trajectories
    from rl.tiny import build_tiny_qwen2_5_vl

    out, _, _ = endpoint_run
    kept = rows(out / "questions.jsonl")
    teacher = ScriptedChat({r["question"]: r["answer"][0] for r in kept})
    try:
        res = synth_trajectories(
            str(out),
            str(tmp_path / "t"),
            PolicyConfig(backend="openai", base_url=teacher.url, max_new_tokens=64),
            AgentConfig(protocol="vrag", max_steps=3),
            concurrency=2,
            compile="acc",
            progress=False,
        )
    finally:
        teacher.close()
    assert res["kept"] == len(kept) and res["dropped"]["wrong"] == 0
    acc = rows(tmp_path / "t" / "acc.jsonl")
    assert len(acc) == len(kept) and all(a["observations"] >= 1 and a["target"] for a in acc)
    model = build_tiny_qwen2_5_vl(tmp_path / "tiny")
    steps = load_examples(str(tmp_path / "t" / "sft"))
    assert len(steps) == 2 * len(kept)  # search, then answer
    from rl.config import SFTConfig

    for spec in (str(tmp_path / "t" / "sft"), str(tmp_path / "t" / "acc.jsonl")):
        got = train_sft(
            SFTConfig(traces=spec, model=str(model), output_dir=str(tmp_path / "sft"), grad_accum=1, max_examples=3),
            progress=False,
        )
        assert got["examples"] == 3 and all(h["loss"] > 0 for h in got["history"])
    from rl.trainer import Trainer
    from tests.rl.tiny_config import tiny_config

    task = {"dataset": f"jsonl:{out / 'questions.jsonl'}", "corpus": str(corpus), "index": str(index)}
    trainer = Trainer(tiny_config(model, task, tmp_path / "rl", updates=2))
    logs = trainer.train(progress=False)
    assert [r["update"] for r in logs] == [1, 2] and all(r["segments"] > 0 for r in logs)
