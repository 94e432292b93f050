"""Answer extraction alone, apart from retrieval: the readers get the gold pages' text and nothing else.

    python -m eval.bench_extract                         # all 543 dev questions, old and new reader
    python -m eval.bench_extract --limit 100 --readers new
    python -m eval.bench_extract --index bench_out/mmlb_idx --out bench_out/extract.jsonl
    python -m eval.bench_extract --replay runs/eval/full-vimrag --thresholds 0.1,0.2,0.3   # calibrate abstention
    python -m eval.bench_extract --calibrate DEV_RUN --simple PLAIN_RUN DEMO_RUN   # fit the reader's confidence

For every MMLongBench-Doc dev question (../shared/data) the readers see the text of its gold pages, as
the index stores it (text layer, or OCR where a page has none; from `--index` when it holds the dev PDFs,
else the PDFs' text layers read with pypdfium2). "Not answerable" questions have no gold pages, so they
get the three pages of their document that BM25 ranks first for the question: what a retriever would
hand over, and the case where abstaining is right. Questions whose gold pages are known to be wrong
(`evidence_ok: false`) are left out.

Readers, run in the same process on the same inputs:
- `old`: the extractor before issue 13 (`agent.reader.extract_baseline.extract_answer`: anchors, numbers by kind,
  SmolLM2 choosing a span);
- `new`: the typed, grounded reader (`agent.reader.extract.read_answer`) with SmolLM2 and MiniLM;
- `new-nolm`: the same without SmolLM2 (rules alone choose free-text spans), to measure what the LM adds.

`--replay RUN` calibrates the reader's abstention threshold instead: it reads an embedded `vimrag eval` run
folder's traces, rebuilds the evidence each episode's last step read (memorized items by relevance, then the
rest, as `EmbeddedPolicy.answer` does) and reads it again at each threshold. The answer is the episode's
last step, so this reproduces the run's answers at its own threshold without running the agent again.

Answers are scored with MMLongBench-Doc's rules by answer format (eval/mmlb_rules.py). Printed: accuracy
by format and overall for each reader, answerable Str + Int accuracy, "Not answerable" F1, the median
seconds per question, and how many answers look like a heading or title (`agent.reader.sentences.is_heading`).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from tqdm import tqdm

from eval.datasets import MMLB, load_dataset

FORMATS = ("Str", "Int", "Float", "List", "None")


def page_texts(index: Path | None) -> dict[tuple[str, int], str]:
    """(file name, page) -> text, from the index's units when it has them, else {} (read from the PDFs)."""
    if index is None or not (index / "store.sqlite").exists():
        return {}
    from retrieval.stores import open_store
    from retrieval.units import page_id

    _, units = open_store(index).units()
    return {page_id(u): u.text for u in units if u.modality == "page"}


@functools.cache
def pdf_pages(path: Path) -> tuple[str, ...]:
    """Every page's text layer of a PDF, read once per run (questions share documents)."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(path))
    try:
        return tuple(page.get_textpage().get_text_range() for page in doc)
    finally:
        doc.close()


def inputs(items, texts: dict[tuple[str, int], str]) -> list[tuple[object, list[tuple[int, str]]]]:
    """(item, [(page, text)]) per question: gold pages, or BM25's top 3 of the document for None."""
    from retrieval.bm25 import Bm25Index

    docs: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for (name, page), t in texts.items():
        docs[name].append((page, t))
    out = []
    for it in items:
        if not it.evidence_ok:
            continue
        if it.evidence:
            pages = sorted({g.page for g in it.evidence if g.page})
            pdf = pdf_pages(MMLB / "documents" / it.doc)
            got = [(p, texts.get((it.doc, p)) or (pdf[p - 1] if p <= len(pdf) else "")) for p in pages]
        else:
            pages = sorted(docs.get(it.doc, []))
            if not pages:
                pages = list(enumerate(pdf_pages(MMLB / "documents" / it.doc), start=1))
            scores = Bm25Index([t for _, t in pages]).scores(it.question)  # (n_pages,)
            got = sorted(pages[i] for i in scores.argsort()[::-1][:3])
        out.append((it, got))
    return out


def headings(texts: list[str]) -> set[str]:
    """The title and heading lines of page texts (lower case, two words or more): what no answer may be."""
    from agent.reader.sentences import is_heading

    out = set()
    for text in texts:
        lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
        out |= {ln.lstrip("# ").lower() for i, ln in enumerate(lines) if ln.startswith("#") or is_heading(ln, i == 0)}
    return {h for h in out if len(h.split()) > 1}


def run_reader(name: str, pairs, lm, encoder) -> list[dict]:
    from agent.reader.extract import Passage, read_answer
    from agent.reader.extract_baseline import extract_answer
    from eval.answer_metrics import score_item

    rows = []
    for it, pages in tqdm(pairs, desc=name, unit="q", file=sys.stderr):
        t0 = time.perf_counter()
        if name == "old":
            pred = extract_answer(it.question, [t for _, t in pages], lm=lm)
            sentence = ""
        else:
            r = read_answer(
                it.question,
                [
                    Passage(t, f"{it.doc} p.{p}", modality="page", page=p, source=str(MMLB / "documents" / it.doc))
                    for p, t in pages
                ],
                lm=lm if name == "new" else None,
                encoder=encoder,
            )
            pred, sentence = r.answer, r.sentence
        dt = time.perf_counter() - t0
        s = score_item({"pred": pred, "gold": it.answers, "answer_format": it.answer_format})
        rows.append(
            {
                "reader": name,
                "id": it.id,
                "format": it.answer_format,
                "question": it.question,
                "gold": it.answers,
                "pred": pred,
                "sentence": sentence,
                "score": s["score"],
                "s": dt,
                "heading": pred.strip().lower() in headings([t for _, t in pages]),
            }
        )
    return rows


def na_f1(rows: list[dict]) -> float:
    tp = sum(r["format"] == "None" and r["score"] >= 1 for r in rows)
    pred_na = sum(r["pred"].strip().lower().startswith("not answerable") for r in rows)
    gold_na = sum(r["format"] == "None" for r in rows)
    p = tp / pred_na if pred_na else 0.0
    rc = tp / gold_na if gold_na else 0.0
    return 2 * p * rc / (p + rc) if p + rc else 0.0


def table(results: dict[str, list[dict]]) -> str:
    names = list(results)
    lines = ["| format (n) | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for f in FORMATS:
        n = sum(r["format"] == f for r in results[names[0]])
        cells = [
            f"{100 * statistics.fmean([r['score'] for r in rows if r['format'] == f] or [0]):.1f}%"
            for rows in results.values()
        ]
        lines.append(f"| {f} ({n}) | " + " | ".join(cells) + " |")
    strint = [[r["score"] for r in rows if r["format"] in ("Str", "Int")] for rows in results.values()]
    lines.append(
        f"| answerable Str + Int ({len(strint[0])}) | "
        + " | ".join(f"{100 * statistics.fmean(s or [0]):.1f}%" for s in strint)
        + " |"
    )
    lines.append(
        f"| all ({len(results[names[0]])}) | "
        + " | ".join(f"{100 * statistics.fmean([r['score'] for r in rows]):.1f}%" for rows in results.values())
        + " |"
    )
    lines.append("| Not answerable F1 | " + " | ".join(f"{na_f1(rows):.3f}" for rows in results.values()) + " |")
    lines.append(
        "| median s / question | "
        + " | ".join(f"{statistics.median([r['s'] for r in rows]):.3f}" for rows in results.values())
        + " |"
    )
    lines.append(
        "| answers that are headings | "
        + " | ".join(str(sum(r["heading"] for r in rows)) for rows in results.values())
        + " |"
    )
    return "\n".join(lines)


def replay_cases(run: Path) -> list[tuple[dict, list]]:
    """(prediction row, passages) of each episode of an embedded run: the evidence its last step read, rebuilt
    from the trace as `EmbeddedPolicy.answer` orders it (memorized items by relevance, then the rest)."""
    from agent.backends.embedded import MAX_PASSAGES, keywords, relevance
    from agent.reader.extract import Passage

    cases = []
    for line in (run / "predictions.jsonl").read_text().splitlines():
        r = json.loads(line)
        t = json.loads((run / r["trace"]).read_text())
        ev, kw = t["evidence"], keywords(r["question"])
        useful = [
            it["info_id"]
            for n in t["graph"]["nodes"]
            for it in n.get("items", [])
            if it.get("useful") and it["info_id"] in ev
        ]
        useful = sorted(dict.fromkeys(useful), key=lambda i: -relevance(kw, ev[i]["text"]))
        rest = [i for i in ev if i not in useful and not ev[i].get("crop_box")]
        ps = [
            Passage(
                ev[i]["text"],
                ev[i]["citation"],
                i,
                ev[i]["unit"]["modality"],
                memorized=k < len(useful),
                page=(ev[i]["unit"].get("page") or 0) if ev[i]["unit"]["modality"] == "page" else 0,
                source=ev[i]["unit"].get("source", ""),
                tables=ev[i]["unit"].get("tables", []),
            )
            for k, i in enumerate((useful + rest)[:MAX_PASSAGES])
            if ev[i]["text"].strip()
        ]
        cases.append((r, ps))
    return cases


def replay(run: Path, thresholds: list[float], lm, encoder, out: Path | None = None) -> str:
    """Accuracy, answerable Str + Int and Not-answerable F1 of the reader at each threshold, on the evidence
    the run's episodes ended with; `out` gets every prediction (JSONL, with its threshold)."""
    from agent.reader.extract import read_answer
    from eval.answer_metrics import score_item

    cases = replay_cases(run)
    lines = [
        "| threshold | accuracy | answerable Str + Int | Not answerable F1 | 'Not answerable' answers |",
        "|---|---|---|---|---|",
    ]
    for th in thresholds:
        rows = []
        for r, ps in tqdm(cases, desc=f"threshold {th}", unit="q", file=sys.stderr):
            pred = read_answer(r["question"], ps, lm=lm, encoder=encoder, threshold=th).answer
            sc = score_item({"pred": pred, "gold": r["gold"], "answer_format": r["answer_format"]})["score"]
            rows.append({"id": r["id"], "threshold": th, "format": r["answer_format"], "pred": pred, "score": sc})
        si = [x["score"] for x in rows if x["format"] in ("Str", "Int")]
        nas = sum(x["pred"].lower().startswith("not answerable") for x in rows)
        lines.append(
            f"| {th} | {100 * statistics.fmean(x['score'] for x in rows):.1f}% | {sum(si):.0f} / {len(si)} | "
            f"{na_f1(rows):.3f} | {nas} |"
        )
        if out:
            out.parent.mkdir(parents=True, exist_ok=True)
            with out.open("a" if th != thresholds[0] else "w") as f:
                f.writelines(json.dumps(x) + "\n" for x in rows)
    return "\n".join(lines)


def calibrate(run: Path, lm, encoder, held_out: set[str], simple: list[Path] = (), c: float = 0.3) -> str:
    """Fit the reader's confidence (agent/reader/confidence.py) on the answers it gives in an embedded run over
    MMLongBench-Doc, leaving out the `held_out` questions (the smoke set), plus every answer of the `simple` runs
    (the bundled plain and demo sets: what a clear, well-supported answer looks like); then show precision against
    coverage on each part, and the largest threshold that still keeps every right answer of the simple runs."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from agent.reader.confidence import FEATURES, confidence
    from agent.reader.extract import read_answer
    from eval.answer_metrics import score_item

    def answers(folder: Path, part) -> list[tuple[str, dict, bool]]:
        out = []
        for r, ps in tqdm(replay_cases(folder), desc=f"reading {folder.name}", unit="q", file=sys.stderr):
            got = read_answer(r["question"], ps, lm=lm, encoder=encoder)
            if got.answered:
                out.append((part(r), got.features, score_item({**r, "pred": got.answer})["score"] >= 1.0))
        return out

    rows = answers(run, lambda r: "held out (smoke)" if r["id"] in held_out else "dev minus smoke")
    for folder in simple:
        rows += answers(folder, lambda r, name=folder.name: f"simple: {name}")
    train = [x for x in rows if x[0] != "held out (smoke)"]
    X = np.array([[f[k] for k in FEATURES] for _, f, _ in train])  # (n, features)
    y = np.array([int(ok) for _, _, ok in train])  # (n,)
    model = LogisticRegression(C=c, max_iter=3000).fit(X, y)
    weights = {"bias": round(float(model.intercept_[0]), 3)}
    weights |= {k: round(float(w), 3) for k, w in zip(FEATURES, model.coef_[0])}
    keep = min((confidence(f, weights) for part, f, ok in rows if part.startswith("simple") and ok), default=0.0)
    lines = [f"WEIGHTS = {weights}", f"largest threshold keeping every right simple answer: {keep:.3f}", ""]
    for name in dict.fromkeys(part for part, _, _ in rows):
        scored = sorted(((confidence(f, weights), ok) for part, f, ok in rows if part == name), key=lambda t: -t[0])
        lines += [f"{name}: {len(scored)} answers, {sum(ok for _, ok in scored)} right"]
        lines += ["| threshold | answers | right | precision |", "|---|---|---|---|"]
        for th in (0.0, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5):
            kept = [ok for conf, ok in scored if conf >= th]
            prec = f"{100 * sum(kept) / len(kept):.1f}%" if kept else "-"
            lines.append(f"| {th} | {len(kept)} | {sum(kept)} | {prec} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="mmlongbench-doc", help="mmlongbench-doc (543) or mmlongbench-doc-smoke")
    ap.add_argument(
        "--index",
        type=Path,
        default=Path("bench_out/mmlb_idx"),
        help="an index of the dev PDFs, for the text the agent sees (OCR included)",
    )
    ap.add_argument("--readers", default="old,new,new-nolm", help="comma-separated: old, new, new-nolm")
    ap.add_argument("--limit", type=int, default=0, help="only the first N questions")
    ap.add_argument("--out", type=Path, help="write every prediction here (JSONL)")
    ap.add_argument("--replay", type=Path, help="an embedded vimrag eval run folder: calibrate the threshold on it")
    ap.add_argument("--thresholds", default="0.1,0.2,0.3", help="with --replay: comma-separated thresholds")
    ap.add_argument(
        "--calibrate",
        type=Path,
        help="an embedded vimrag eval run over mmlongbench-doc (run with --min-confidence 0): fit the reader's "
        "confidence on its questions outside the smoke set and on --simple runs, and show precision against "
        "coverage (the smoke set held out)",
    )
    ap.add_argument(
        "--simple",
        type=Path,
        nargs="*",
        default=[],
        help="with --calibrate: embedded runs of the bundled plain and demo sets (--min-confidence 0)",
    )
    ap.add_argument("--C", type=float, default=0.3, help="with --calibrate: inverse L2 strength of the fit")
    a = ap.parse_args(argv)
    if a.calibrate:
        from agent.reader.smollm import get_small_lm
        from retrieval.embedders import load_embedder

        held_out = {it.id for it in load_dataset("mmlongbench-doc-smoke").items}
        print(calibrate(a.calibrate, get_small_lm(), load_embedder("minilm"), held_out, a.simple, a.C))
        return 0
    if a.replay:
        from agent.reader.smollm import get_small_lm
        from retrieval.embedders import load_embedder

        ths = [float(x) for x in a.thresholds.split(",")]
        print(replay(a.replay, ths, get_small_lm(), load_embedder("minilm"), a.out))
        return 0
    ds = load_dataset(a.dataset)
    items = ds.items[: a.limit] if a.limit else ds.items
    texts = page_texts(a.index)
    print(
        f"{len(items)} questions; page text from {'the index ' + str(a.index) if texts else 'the PDFs'}",
        file=sys.stderr,
    )
    pairs = inputs(items, texts)
    from agent.reader.smollm import get_small_lm
    from retrieval.embedders import load_embedder

    lm, encoder = get_small_lm(), load_embedder("minilm")
    results = {name: run_reader(name, pairs, lm, encoder) for name in a.readers.split(",")}
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        with a.out.open("w") as f:
            for rows in results.values():
                for r in rows:
                    f.write(json.dumps(r) + "\n")
    print(f"\nExtraction alone on gold-page text: {a.dataset}, {len(pairs)} questions\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
