"""`vimrag synth` asks about tables (issue 55): cell lookups and one-step arithmetic with answers computed from the
cells and re-read by the table reader; questions that name the document by its own title, never its file; pairs
of related facts from one document only; no rule over its share of the kept items; no value without a subject.

The table page is tests/table_pdf.py's (a rule-less income statement, 'in millions', 2025 and 2024)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from rl.synth import checks, doc_names, pairs, statements, table_rules
from rl.synth.items import Item
from rl.synth.questions import RULE_CAP, SynthConfig, rule_open, synth_questions
from rl.synth.verdicts import _unambiguous
from tests.table_pdf import make_table_pdf

NAME = "Northwind Robotics Annual Report 2025"


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    return make_table_pdf(tmp_path_factory.mktemp("tables") / "q3_final_v2.pdf")


def _page(path: Path) -> dict:
    import pypdfium2 as pdfium

    text = pdfium.PdfDocument(str(path))[0].get_textpage().get_text_range()
    unit = {"uid": "u1", "source": str(path), "page": 1, "name": path.name, "doc_title": doc_names.doc_name(str(path))}
    return {"unit": unit, "text": text, "cite": f"{path.name} p.1", "page": 1}


def test_the_table_rule_asks_lookups_differences_and_changes_computed_from_the_cells(report):
    page = _page(report)
    drafts = table_rules.table_drafts(page["unit"], page["text"], page["unit"]["doc_title"])
    got = {d.question: (d.rule, d.answer, d.type) for d in drafts}
    lookup = f'In "{NAME}", what were net sales in 2025 (in millions)?'
    difference = f'In "{NAME}", by how much did net income increase from 2024 to 2025 (in millions)?'
    change = f'In "{NAME}", what was the percentage change in gross profit from 2024 to 2025?'
    assert got[lookup] == ("table-cell", "2045", "table")
    assert got[difference] == ("table-difference", "78", "table")  # 318 - 240
    assert got[change] == ("table-change", "16.0%", "table")  # (835 - 720) / 720
    assert not any("cost of sales" in q for q in got)  # '(1,210)': which sign the document means is a guess
    assert all(NAME in q and "q3_final_v2" not in q and ".pdf" not in q for q in got)  # its name, never its file
    v = checks.OfflineVerifier()
    for d in drafts:  # every draft is grounded: its cells printed, the table reader re-reading the page agrees
        ok, why = v.grounded(d.question, d.answer, d.answer_format, [page], d.reread, d.cells)
        assert ok, (d.question, why)
    d = next(d for d in drafts if d.question == difference)
    ok, why = v.grounded(d.question, "87", d.answer_format, [page], d.reread, d.cells)
    assert not ok and "answers '78'" in why
    assert "Net income / 2025: 318" in d.sentence  # the cells it rests on, for the card's reader


def test_a_document_is_named_by_its_title_and_a_nameless_one_is_not_asked(report, tmp_path):
    assert doc_names.doc_name(str(report)) == NAME  # the first page's largest type; its file is q3_final_v2.pdf
    assert doc_names.usable_name("Microsoft Word - q3_final_v2.docx") == ""
    assert doc_names.usable_name("User Manual") == doc_names.usable_name("Contents") == ""
    assert doc_names.usable_name("RAPTOR: RECURSIVE ABSTRACTIVE PROCESSING FOR TREE-ORGANIZED RETRIEVAL") == (
        "RAPTOR: Recursive Abstractive Processing for Tree-Organized Retrieval"
    )
    page = _page(report)
    assert table_rules.table_drafts(page["unit"], page["text"], "") == []  # no name: passed over, not named by file
    from rl.synth import offline

    heads = ["Fares and passes", "Crowding on trains", "Delays by line", "Survey methods", "Rider comments"]
    toc = "Contents\n" + "\n".join(f"{h} ........ {i}" for i, h in enumerate(heads, 2))
    unit = {"source": "/c/plan_v7.pdf", "page": 1, "name": "plan_v7.pdf"}
    assert offline.page_drafts(unit | {"doc_title": ""}, toc, set(), deck=False) == []
    named = offline.page_drafts(unit | {"doc_title": "The Harbor Plan"}, toc, set(), deck=False)
    assert named and all('of "The Harbor Plan"' in d.question and "plan_v7" not in d.question for d in named)


def test_the_unambiguity_check_names_the_document_by_its_title_or_rejects(report):
    class Hit:
        def __init__(self, unit):
            self.unit = unit

    class Other:
        doc, name, page = "", "other.pdf", 3

        def citation(self):
            return "other.pdf p.3"

    class Retriever:
        def search(self, q, k):
            return [Hit(Other())]

    class Verifier:
        def rival(self, q, page):
            return "55%"

    for title, kept in ((NAME, True), ("", False)):
        unit = {"source": str(report), "page": 1, "name": report.name, "doc_title": title}
        draft = statements.statement_drafts("About 45% of riders say the trains are late.", unit, "text")[0]
        item = Item(
            "x", draft.question, [draft.answer], "text", [{"file": report.name, "page": 1}], "Float", doc=report.name
        )
        _unambiguous(item, [draft], Retriever(), Verifier(), lambda u: {"text": "", "cite": ""})
        assert item.verdicts["unambiguous"]["ok"] is kept
        if kept:
            assert item.question == f'In "{NAME}", what percentage of riders say the trains are late?'
        else:
            assert "no title of its own" in item.verdicts["unambiguous"]["reason"]


def test_pairs_join_related_facts_of_one_document_never_two_documents():
    def fact(sentence: str, source: str, page: int):
        return statements.statement_drafts(sentence, {"source": source, "page": page, "name": source}, "text")[0]

    a = fact("About 62% of Republicans say the economy is good.", "/c/a.pdf", 2)
    b = fact("About 41% of Republicans say taxes are too high.", "/c/a.pdf", 9)
    pair = pairs.pair_draft(a, b)
    assert pair.question == (
        "What percentage of Republicans say the economy is good, and what percentage of Republicans say taxes are "
        "too high?"
    )
    assert (pair.answer, pair.hops, pair.type) == ("['62%', '41%']", 2, "multi-page")
    assert pairs.related(a, b).startswith("the same entity")
    other_doc = fact("About 41% of Republicans say taxes are too high.", "/c/b.pdf", 9)
    assert pairs.pair_draft(a, other_doc) is None and pairs.related(a, other_doc) == ""  # never two documents
    irs = fact("The Internal Revenue Service (IRS) audits returns.", "/c/a.pdf", 3)
    flsa = fact("The Fair Labor Standards Act (FLSA) sets wages.", "/c/a.pdf", 14)
    assert pairs.pair_draft(irs, flsa) is None  # two unrelated acronyms of one report
    assert pairs.pair_draft(a, a) is None


def test_no_rule_passes_its_share_of_the_kept_items():
    """However lopsided the drafts (here 80% acronyms), each rule's share of the kept set stays within the cap."""
    rng = random.Random(0)
    kept: Counter = Counter()
    for _ in range(400):
        rule = "acronym" if rng.random() < 0.8 else rng.choice(["share", "count", "title", "table-cell"])
        if rule_open(kept, rule):
            kept["text"] += 1
            kept["rule:" + rule] += 1
            total = kept["text"]
            if total >= 6:
                assert max(v for k, v in kept.items() if k.startswith("rule:")) <= RULE_CAP * total
    assert kept["rule:acronym"] <= RULE_CAP * kept["text"] and kept["text"] > 50


def test_a_value_without_a_subject_is_passed_over():
    unit = {"source": "/c/r.pdf", "page": 1, "name": "r.pdf"}
    assert statements.statement_drafts("The estimated annualized pretax cost is $400.", unit, "text") == []
    assert statements.statement_drafts("The median age was 38 in 2010.", unit, "text") == []  # whose?
    assert statements.statement_drafts("A complete measurement takes about 45 seconds.", unit, "text") == []
    (d,) = statements.statement_drafts("The median age of residents was 38 in 2010.", unit, "text")
    assert (d.question, d.answer) == ("What was the median age of residents in 2010?", "38")


@pytest.mark.slow
def test_a_run_over_a_table_page_keeps_table_items_grounded_by_the_reader(report, tmp_path):
    from retrieval.ingest import Indexer

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    make_table_pdf(corpus / "q3_final_v2.pdf")
    Indexer(tmp_path / "idx").index([str(corpus)], progress=False)
    card = synth_questions(SynthConfig(index=str(tmp_path / "idx"), out=str(tmp_path / "o"), n=6), progress=False)
    import json

    kept = [json.loads(x) for x in (tmp_path / "o" / "questions.jsonl").read_text().splitlines()]
    tables = [r for r in kept if r["question_type"] == "table"]
    assert len(tables) >= 3 and card["kept"] == len(kept)
    assert {r["source"] for r in tables} >= {"offline:table-cell", "offline:table-difference"}
    assert all(NAME in r["question"] and "q3_final_v2" not in r["question"] for r in tables)
    journal = [json.loads(x) for x in (tmp_path / "o" / "journal.jsonl").read_text().splitlines()]
    reasons = {r["item"]["id"]: r["item"]["verdicts"]["grounded"]["reason"] for r in journal if r.get("item")}
    assert all(reasons[r["id"]].startswith("the table reader reads") for r in tables)
