"""eval/report.py on synthetic prediction rows: hand-computed metrics, tolerant reading, every output file."""

import json
from pathlib import Path

import pytest
from PIL import Image

from eval.report import compare, load_rows, main, write_report
from eval.run_metrics import compute_metrics, mmlb_f1

NA = "Not answerable"
CONFIG = {
    "dataset": "mmlongbench-doc-smoke",
    "protocol": "vimrag",
    "backend": "embedded",
    "policy": {},
    "agent": {},
    "seed": 0,
    "index": "idx",
    "limit": None,
    "started": "2025-01-01T00:00:00",
    "vimrag_version": "0.1.0",
}


def make_row(i: int, **over) -> dict:
    """A prediction row in the runner's schema; nested dicts given in `over` update the defaults."""
    row = {
        "id": f"q{i}",
        "dataset": "mmlongbench-doc-smoke",
        "question": f"question {i}?",
        "gold": ["3"],
        "answer_format": "Int",
        "evidence_sources": ["Table"],
        "doc_type": "Academic paper",
        "gold_pages": [["a.pdf", 1]],
        "pred": "3",
        "extracted": "3",
        "status": "answered",
        "error": "",
        "scores": {"mmlb": 1.0, "anls": 1.0, "em": 1.0, "f1": 1.0, "num": 1.0, "judge": None},
        "score": 1.0,
        "retrieval": {
            "recall@1": 1.0,
            "recall@5": 1.0,
            "ndcg@5": 1.0,
            "mrr": 1.0,
            "memorized_hit": True,
            "retrieved_hit": True,
        },
        "cost": {
            "steps": 3,
            "model_calls": 3,
            "peak_visual_tokens": 1000,
            "peak_image_pixels": 10**6,
            "total_visual_tokens": 2500,
            "visual_tokens_per_step": [500, 1000, 1000],
            "wall_s": 2.0,
            "model_s": 1.5,
            "retrieval_s": 0.3,
            "agent_s": 0.2,
            "tool_s": 0.4,
        },
        "protocol": "vimrag",
        "backend": "embedded",
        "trace": f"traces/q{i}.json",
    }
    for k, v in over.items():
        row[k] = {**row[k], **v} if isinstance(v, dict) and isinstance(row.get(k), dict) else v
    return row


NULL_RET = {k: None for k in ("recall@1", "recall@5", "ndcg@5", "mrr", "memorized_hit", "retrieved_hit")}


def six_rows() -> list[dict]:
    """Hand-worked MMLongBench-Doc case. Answerable: q1 q2 q3 q6 (scores 1, 0, 1, 0 -> recall 2/4);
    not declined: q1 q3 q5 (precision 2/3); F1 = 2 * (1/2)(2/3) / (1/2 + 2/3) = 4/7; accuracy 3/6."""
    return [
        make_row(1, evidence_sources=["Chart", "Table"], cost={"steps": 1, "visual_tokens_per_step": [100]}),
        make_row(
            2,
            gold=["a"],
            answer_format="Str",
            extracted=NA,
            pred=NA,
            score=0.0,
            status="error",
            retrieval={"recall@5": 0.0, "memorized_hit": False},
            cost={"steps": 2, "visual_tokens_per_step": [100, 300]},
        ),
        make_row(
            3,
            gold=["['x', 'y']"],
            answer_format="List",
            extracted="['x', 'y']",
            evidence_sources=["Chart", "Pure-text (Plain-text)"],
            gold_pages=[["a.pdf", 2], ["b.pdf", 7]],
            retrieval={"recall@5": 0.5},
            cost={"steps": 3, "visual_tokens_per_step": [200, 500, 900]},
        ),
        make_row(
            4,
            gold=[NA],
            answer_format="None",
            extracted=NA,
            evidence_sources=[],
            doc_type="Guidebook",
            gold_pages=[],
            retrieval=NULL_RET,
            cost={"steps": 4, "visual_tokens_per_step": []},
        ),
        make_row(
            5,
            gold=[NA],
            answer_format="None",
            extracted="7",
            score=0.0,
            evidence_sources=[],
            doc_type="Guidebook",
            gold_pages=[],
            retrieval=NULL_RET,
            cost={"steps": 5},
        ),
        make_row(
            6,
            gold=["2.5"],
            answer_format="Float",
            extracted=NA,
            score=0.0,
            status="limit",
            evidence_sources=["Figure"],
            doc_type="Guidebook",
            retrieval={"memorized_hit": None},
            cost={"steps": 10},
        ),
    ]


def write_run(folder: Path, rows: list[dict], config: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "config.json").write_text(json.dumps(config or CONFIG))
    return folder


def test_accuracy_and_mmlb_f1_hand_computed():
    m = compute_metrics(six_rows(), CONFIG)
    assert m["n"] == 6
    assert m["accuracy"] == pytest.approx(0.5)
    assert m["mmlb"]["recall"] == pytest.approx(0.5)
    assert m["mmlb"]["precision"] == pytest.approx(2 / 3)
    assert m["mmlb"]["f1"] == pytest.approx(4 / 7)
    assert m["status"] == {"answered": 4, "limit": 1, "error": 1}
    assert m["judge"] is None


def test_f1_zero_denominators():
    declined = [make_row(1, gold=[NA], extracted=NA, score=1.0)]  # nothing answerable, nothing attempted
    assert mmlb_f1(declined) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    generic = compute_metrics([make_row(1, answer_format="")], {})
    assert generic["mmlb"] is None and generic["by_page_group"] == {} and generic["by_format"] == {}


def test_breakdowns_count_multi_source_rows_under_each_source():
    m = compute_metrics(six_rows(), CONFIG)
    src = {k: (g["n"], g["accuracy"]) for k, g in m["by_source"].items()}
    assert src == {"Chart": (2, 1.0), "Table": (2, 0.5), "Pure-text (Plain-text)": (1, 1.0), "Figure": (1, 0.0)}
    fmt = {k: (g["n"], g["accuracy"]) for k, g in m["by_format"].items()}
    assert fmt == {"Float": (1, 0.0), "Int": (1, 1.0), "List": (1, 1.0), "None": (2, 0.5), "Str": (1, 0.0)}
    assert m["by_doc_type"]["Academic paper"]["n"] == 3
    assert m["by_doc_type"]["Guidebook"]["accuracy"] == pytest.approx(1 / 3)
    pages = {k: (g["n"], g["accuracy"]) for k, g in m["by_page_group"].items()}
    assert pages == {"single-page": (3, pytest.approx(1 / 3)), "cross-page": (1, 1.0), "unanswerable": (2, 0.5)}


def test_retrieval_means_ignore_nulls_and_cost_spread():
    m = compute_metrics(six_rows(), CONFIG)
    r = m["retrieval"]
    assert r["recall@5"] == {"mean": pytest.approx((1.0 + 0.0 + 0.5 + 1.0) / 4), "n": 4}
    assert r["memorized_hit"] == {"mean": pytest.approx(2 / 3), "n": 3}  # q6's null is not a miss
    assert r["recall@1"]["n"] == 4
    steps = m["cost"]["steps"]
    assert steps["mean"] == pytest.approx(25 / 6) and steps["median"] == 3.5
    assert steps["p90"] == pytest.approx(7.5)  # linear interpolation between 5 and 10
    assert m["cost"]["model_s"]["mean"] == pytest.approx(1.5)
    curve = m["cost"]["visual_tokens_by_step"]
    assert curve["episodes"][:3] == [5, 4, 3]  # q1 stops after 1 step, q2 after 2, q4 has none
    assert curve["mean"][0] == pytest.approx((100 + 100 + 200 + 500 + 500) / 5)


def test_all_null_retrieval_and_judge_counts():
    rows = [make_row(i, retrieval=NULL_RET, scores={"judge": j}) for i, j in enumerate([1.0, None, 0.0])]
    m = compute_metrics(rows, CONFIG)
    assert all(v == {"mean": None, "n": 0} for v in m["retrieval"].values())
    assert m["judge"] == {"mean": 0.5, "n_judged": 2}


def test_load_rows_skips_blanks_and_tolerates_truncated_last_line(tmp_path):
    rows = six_rows()[:3]
    text = json.dumps(rows[0]) + "\n\n" + json.dumps(rows[1]) + "\n" + json.dumps(rows[2]) + "\n"
    (tmp_path / "predictions.jsonl").write_text(text + json.dumps(make_row(9))[:40])
    with pytest.warns(UserWarning, match="truncated"):
        got = load_rows(tmp_path)
    assert [r["id"] for r in got] == ["q1", "q2", "q3"]


def test_load_rows_errors_name_the_file_and_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"predictions\.jsonl.*vimrag eval --dataset"):
        load_rows(tmp_path / "nope")
    (tmp_path / "predictions.jsonl").write_text('{"id": "a", "sc\n' + json.dumps(make_row(1)) + "\n")
    with pytest.raises(ValueError, match=r"predictions\.jsonl:1"):
        load_rows(tmp_path)


def _png_ok(path: Path) -> None:
    with Image.open(path) as im:
        im.verify()
    with Image.open(path) as im:
        assert im.format == "PNG" and im.width >= 400 and im.height >= 200


def test_write_report_writes_every_file(tmp_path):
    run = write_run(tmp_path / "vimrag-smoke", six_rows())
    m = write_report(run)
    assert json.loads((run / "metrics.json").read_text()) == json.loads(json.dumps(m))
    md = (run / "report.md").read_text()
    assert md.startswith("# mmlongbench-doc-smoke · vimrag · embedded")
    for piece in (
        "50.0%",
        "57.1%",
        "## By evidence source",
        "| Chart | 2 | 100.0% |",
        "## Retrieval",
        "## Cost per question",
        "generating 1.50, retrieval 0.30, agent 0.20, waiting on tools 0.40",  # the time split
        "| unanswerable | 2 | 50.0% |",
        "plots/steps_hist.png",
    ):
        assert piece in md, piece
    for name in ("accuracy_by_format", "accuracy_by_source", "steps_hist", "visual_tokens_per_step"):
        _png_ok(run / "plots" / f"{name}.png")


@pytest.mark.parametrize(
    "rows",
    [
        [],
        [
            make_row(
                1,
                retrieval=NULL_RET,
                answer_format="",
                evidence_sources=[],
                doc_type="",
                cost={"visual_tokens_per_step": []},
            )
        ],
    ],
)
def test_write_report_survives_empty_runs(tmp_path, rows):
    run = write_run(tmp_path / "r", rows, {"dataset": "generic", "protocol": "react", "backend": "embedded"})
    m = write_report(run)
    assert m["n"] == len(rows)
    assert "# generic · react · embedded" in (run / "report.md").read_text()
    for png in (run / "plots").glob("*.png"):
        _png_ok(png)
    assert len(list((run / "plots").glob("*.png"))) == 4


def test_compare_two_runs_table_and_plots(tmp_path):
    vim = write_run(tmp_path / "vimrag", six_rows())
    react_rows = [
        make_row(
            i,
            protocol="react",
            score=float(i % 2),
            cost={"total_visual_tokens": 12_345, "total_tokens": 20_000, "peak_context_tokens": 6_000},
        )
        for i in range(4)
    ]
    react = write_run(tmp_path / "react", react_rows, {**CONFIG, "protocol": "react"})
    out = tmp_path / "cmp"
    md = compare([vim, react], out)
    lines = md.splitlines()
    assert len(lines) == 4 and "F1" in lines[0] and "page R@5" in lines[0] and "s / q" in lines[0]
    assert lines[2].startswith("| vimrag | mmlongbench-doc-smoke | vimrag | embedded | 6 | 50.0% | 57.1% | 62.5% |")
    assert lines[3].startswith("| react | mmlongbench-doc-smoke | react | embedded | 4 | 50.0% |")
    assert "12,345" in lines[3] and "6,000" in lines[3] and "20,000" in lines[3] and "2,500" in lines[2]
    assert "peak context" in lines[0] and "tokens / q" in lines[0]
    assert md in (out / "compare.md").read_text()
    _png_ok(out / "tokens_vs_accuracy.png")
    _png_ok(out / "cost_by_protocol.png")


def test_cli_one_run_reports_several_compare(tmp_path, capsys):
    a = write_run(tmp_path / "a", six_rows())
    b = write_run(tmp_path / "b", six_rows()[:2], {**CONFIG, "protocol": "vanilla"})
    main([str(a)])
    assert (a / "report.md").is_file() and "accuracy 50.0%" in capsys.readouterr().out
    main([str(a), str(b), "--compare-out", str(tmp_path / "cmp")])
    printed = capsys.readouterr().out
    assert "| a | mmlongbench-doc-smoke | vimrag |" in printed and "| b | mmlongbench-doc-smoke | vanilla |" in printed
    assert (tmp_path / "cmp" / "tokens_vs_accuracy.png").is_file()


def test_rescore_applies_the_current_scorer_and_the_report_counts_sentence_golds(tmp_path):
    """A run scored by the old numeric match (any number of the prediction against the gold's first number) is
    scored again; a sentence gold's row is counted as scored by token overlap in the report."""
    from eval.runner import rescore_run

    sentence = "Operating margin for 3M fell by 1.7% in FY2022, mainly because of higher raw material costs"
    fooled = {"pred": "effect on 3M's consolidated results of", "gold": [sentence], "score": 1.0}
    listed = {"pred": "1373, 1577", "gold": ["$1577.00"], "score": 1.0}
    right = {"pred": "1,577", "gold": ["$1577.00"], "score": 1.0}
    rows = [make_row(i, answer_format="", extracted=r["pred"], **r) for i, r in enumerate((fooled, listed, right))]
    judged = make_row(3, answer_format="", pred="x", extracted="x", gold=[sentence], score=1.0, scores={"judge": 1.0})
    run = write_run(tmp_path / "run", rows + [judged], {**CONFIG, "dataset": "jsonl:x.jsonl"})
    out = rescore_run(run)
    assert (out["before"], out["after"]) == (1.0, 0.5)
    assert [(c["id"], c["before"], c["after"]) for c in out["changed"]] == [("q0", 1.0, 0.0), ("q1", 1.0, 0.0)]
    rescored = load_rows(run)
    assert [r["scored_by"] for r in rescored] == ["overlap", "number", "number", "judge"]
    assert rescored[3]["score"] == 1.0  # the judge's verdict is kept
    report = (run / "report.md").read_text()
    assert "1 of 4 rows have sentence golds and were scored by token overlap" in report
