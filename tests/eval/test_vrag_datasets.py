"""`vimrag eval` on ViDoSeek- and SlideVQA-style files: hand-made rows in the shape VRAG publishes
(VRAG-RL/examples/rag_dataset.json: `{"examples": [{uid, query, reference_answer, meta_info{file_name,
reference_page[], source_type (a string or a list), doc_type?, answer_format?, query_type?}}]}`), over the
bundled corpus. A retrieved gold page must count as a hit, and the report must name `query_type` as the
question type, not the document type."""

import json
from pathlib import Path

import pytest

from app.cli import main

REPO = Path(__file__).resolve().parents[2]
REPORT = "aurora_annual_report_2025.pdf"

VIDOSEEK = {
    "examples": [
        {
            "uid": 0,
            "query": "What was Aurora Robotics' total revenue in 2025?",
            "reference_answer": "48.6 million",
            "meta_info": {
                "file_name": REPORT,
                "reference_page": [1],
                "source_type": ["Text"],
                "doc_type": "Annual report",
                "answer_format": "Str",
            },
        },
        {
            "uid": 1,
            "query": "How much revenue did Europe bring Aurora in 2025?",
            "reference_answer": "21.4 million",
            "meta_info": {
                "file_name": REPORT,
                "reference_page": [2],
                "source_type": "Table",
                "query_type": "Single-Hop_Single-Span",
            },
        },
    ]
}
SLIDEVQA = [  # SlideVQA as VRAG ships it: the same unified shape, a query_type and no source_type
    {
        "uid": "s1",
        "query": "By what percentage did Aurora's revenue grow in 2025?",
        "reference_answer": "31%",
        "meta_info": {"file_name": REPORT, "reference_page": [1], "query_type": "Single-Hop"},
    },
    {
        "uid": "s2",
        "query": "In which quarter of 2025 did robot shipments set a record?",
        "reference_answer": "Q4",
        "meta_info": {"file_name": REPORT, "reference_page": [3], "query_type": "Multi-Hop"},
    },
]


@pytest.mark.parametrize("kind,data", [("vidoseek", VIDOSEEK), ("slidevqa", SLIDEVQA)])
def test_vrag_shaped_rows_run_end_to_end(kind, data, bundled_index, tmp_path):
    f = tmp_path / f"{kind}.json"
    f.write_text(json.dumps(data))
    out = tmp_path / "run"
    assert (
        main(
            [
                "eval",
                "--dataset",
                f"{kind}:{f}",
                "--corpus",
                str(REPO / "assets" / "corpus"),
                "--index",
                str(bundled_index),
                "--model",
                "keyword",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for r in rows:
        assert r["gold_pages"] and r["gold_pages"][0][0] == REPORT
        ret = r["retrieval"]
        assert ret["retrieved_hit"] is True and ret["recall@5"] > 0 and ret["ndcg@5"] > 0, (r["id"], ret)
    report = (out / "report.md").read_text()
    assert "## By question type" in report
    if kind == "vidoseek":
        assert rows[0]["evidence_sources"] == ["Text"] and rows[1]["evidence_sources"] == ["Table"]
        assert rows[0]["doc_type"] == "Annual report" and rows[1]["doc_type"] == ""
        assert rows[0]["answer_format"] == "Str" and rows[1]["question_type"] == "Single-Hop_Single-Span"
        assert "## By document type" in report and "## By evidence source" in report
    else:
        assert [r["question_type"] for r in rows] == ["Single-Hop", "Multi-Hop"]
        assert all(r["doc_type"] == "" for r in rows) and "## By document type" not in report
