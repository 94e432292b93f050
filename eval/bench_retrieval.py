"""Retrieval benchmark on the MMLongBench-Doc dev set: quality, ingest throughput and query latency.

    python -m eval.bench_retrieval                     # full run (builds ./bench_out/mmlb_idx once, ~minutes)
    python -m eval.bench_retrieval --docs 10 --ocr-pages 10   # quick run on a subset

What it measures, each against a baseline measured in the same run:
- quality: page recall@1/5/10, NDCG@5 and MRR@10 for BM25-only (the baseline), dense-only and hybrid, over
  the questions with `evidence_ok` and non-empty gold pages, corpus-wide (all pages of all PDFs in one
  index, as VRAG-RL and VimRAG evaluate) and doc-scoped (only the question's own PDF, as MMLongBench-Doc
  was designed);
- ingest throughput in pages/s for the text-layer path (baseline) and the OCR path (pages rendered and
  OCR'd as if scanned), model loading excluded;
- query latency p50/p95 per mode at the dev corpus size (baseline: BM25).
It leaves out answer quality (that is `vimrag eval`) and vector-index scaling (`python -m eval.bench_vectors`).
Needs ../shared/data/mmlongbench_doc.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from tqdm.auto import tqdm

from eval.retrieval_metrics import mrr, ndcg_at_k, recall_at_k

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mmlongbench_doc"
MODES = ("bm25", "dense", "hybrid")


def load_questions(data: Path, docs: set[str] | None = None) -> list[dict]:
    qs = []
    for line in (data / "mmlongbench_doc.jsonl").read_text().splitlines():
        q = json.loads(line)
        if not q.get("evidence_ok") or not q.get("evidence_pages"):
            continue
        doc = Path(q["doc"]).name
        if docs is not None and doc not in docs:
            continue
        q["gold"] = {(doc, int(p)) for p in q["evidence_pages"]}
        qs.append(q)
    return qs


def quality(retriever, questions: list[dict], scoped: bool, modes=MODES) -> dict[str, dict[str, float]]:
    out = {}
    for mode in modes:
        rows = {"R@1": [], "R@5": [], "R@10": [], "NDCG@5": [], "MRR@10": []}
        for q in tqdm(questions, desc=f"{mode:>6} {'doc' if scoped else 'corpus'}", leave=False):
            filters = {"docs": [Path(q["doc"]).name]} if scoped else None
            hits = retriever.search(q["question"], k=10, filters=filters, mode=mode)
            ranked = [(h.unit.name, h.unit.page) for h in hits]
            for k in (1, 5, 10):
                rows[f"R@{k}"].append(recall_at_k(ranked, q["gold"], k))
            rows["NDCG@5"].append(ndcg_at_k(ranked, q["gold"], 5))
            rows["MRR@10"].append(mrr(ranked, q["gold"], 10))
        out[mode] = {m: statistics.fmean(v) for m, v in rows.items()}
    return out


def latency(retriever, questions: list[dict], n: int) -> dict[str, tuple[float, float]]:
    qs = [q["question"] for q in questions[:n]]
    out = {}
    for mode in MODES:
        retriever.search(qs[0], k=10, mode=mode)  # warm-up
        ts = []
        for q in qs:
            t = time.perf_counter()
            retriever.search(q, k=10, mode=mode)
            ts.append((time.perf_counter() - t) * 1000)
        ts.sort()
        out[mode] = (ts[len(ts) // 2], ts[min(len(ts) - 1, int(0.95 * len(ts)))])
    return out


def throughput(pdfs: list[Path], ocr_pages: int, seed: int) -> dict[str, float]:
    """pages/s of the text-layer path over `pdfs`, and of the OCR path over `ocr_pages` pages."""
    from retrieval.embedders import load_embedder
    from retrieval.ingest import Indexer, IngestConfig
    from retrieval.ocr import get_ocr

    emb = load_embedder("minilm")  # loaded once, outside the timings
    ocr = get_ocr("auto")
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        s = Indexer(Path(tmp) / "text", IngestConfig(ocr="none"), embedder=emb).index(pdfs, progress=False)
        res["text-layer pages/s"] = s.units_indexed / (time.perf_counter() - t)
        # The OCR path: the same reader, but every page is treated as scanned (rendered, then OCR'd).
        rng = random.Random(seed)
        subset = Path(tmp) / "ocr_corpus"
        subset.mkdir()
        import pypdfium2 as pdfium

        chosen, n = [], 0
        for p in rng.sample(pdfs, len(pdfs)):
            pages = len(pdfium.PdfDocument(str(p)))
            if n + pages > ocr_pages and chosen:
                continue
            chosen.append(p)
            n += pages
            if n >= ocr_pages:
                break
        for p in chosen:
            shutil.copy(p, subset / p.name)
        t = time.perf_counter()
        s = Indexer(Path(tmp) / "ocr", IngestConfig(min_text_chars=10**9), embedder=emb, ocr=ocr).index(
            [subset], progress=False
        )
        res["ocr pages/s"] = s.units_indexed / (time.perf_counter() - t)
        res["ocr engine"] = ocr.name if ocr else "none"
        res["ocr pages"] = s.units_indexed
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--index", default="bench_out/mmlb_idx", help="index folder, built once and reused")
    ap.add_argument("--docs", type=int, default=0, help="use only the N smallest PDFs (0 = all)")
    ap.add_argument("--latency-queries", type=int, default=200)
    ap.add_argument("--throughput-docs", type=int, default=10, help="PDFs for the text-layer throughput run")
    ap.add_argument("--ocr-pages", type=int, default=40, help="pages for the OCR throughput run")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the figures to this JSON file")
    args = ap.parse_args()

    data = Path(args.data)
    if not (data / "mmlongbench_doc.jsonl").exists():
        raise SystemExit(f"no MMLongBench-Doc data at {data}; pass --data")
    pdfs = sorted((data / "documents").glob("*.pdf"), key=lambda p: p.stat().st_size)
    if args.docs:
        pdfs = pdfs[: args.docs]
    names = {p.name for p in pdfs}
    questions = load_questions(data, names)
    figures: dict = {"questions": len(questions), "pdfs": len(pdfs)}

    from retrieval.ingest import Indexer, IngestConfig
    from retrieval.retriever import Retriever

    idx = Path(args.index)
    summary = Indexer(idx, IngestConfig()).index(pdfs)
    print(summary.format().splitlines()[0])
    retriever = Retriever(idx)
    figures["pages"] = sum(1 for u in retriever.units if u.name in names)
    print(
        f"\n{len(questions)} questions with gold pages over {len(pdfs)} PDFs, {figures['pages']} pages "
        f"(embedder {retriever.spec}, fusion {retriever.fusion})\n"
    )

    for scoped in (False, True):
        q = quality(retriever, questions, scoped)
        figures["doc-scoped" if scoped else "corpus-wide"] = q
        base = q["bm25"]["R@5"]
        print(f"### {'doc-scoped' if scoped else 'corpus-wide'} page retrieval")
        print("| method | R@1 | R@5 | R@10 | NDCG@5 | MRR@10 | R@5 / BM25 |")
        print("|---|---|---|---|---|---|---|")
        for mode, m in q.items():
            print(
                f"| {mode} | {m['R@1']:.3f} | {m['R@5']:.3f} | {m['R@10']:.3f} | {m['NDCG@5']:.3f} | "
                f"{m['MRR@10']:.3f} | {m['R@5'] / base:.3f} |"
            )
        best_single = max(q["bm25"]["R@5"], q["dense"]["R@5"])
        verdict = "PASS" if q["hybrid"]["R@5"] >= best_single else "FAIL"
        print(f"hybrid R@5 {q['hybrid']['R@5']:.3f} vs best single {best_single:.3f}: {verdict}\n")

    lat = latency(retriever, questions, args.latency_queries)
    figures["latency_ms"] = lat
    print(
        f"### query latency at {len(retriever.units)} units, k=10 ({min(args.latency_queries, len(questions))} queries)"
    )
    print("| mode | p50 ms | p95 ms | p50 / BM25 |")
    print("|---|---|---|---|")
    for mode, (p50, p95) in lat.items():
        print(f"| {mode} | {p50:.1f} | {p95:.1f} | {p50 / lat['bm25'][0]:.2f} |")

    if not args.skip_throughput:
        tp = throughput(pdfs[: args.throughput_docs], args.ocr_pages, args.seed)
        figures["throughput"] = tp
        print("\n### ingest throughput (model load excluded)")
        print("| path | pages/s | ratio to text-layer |")
        print("|---|---|---|")
        print(f"| text layer + MiniLM | {tp['text-layer pages/s']:.1f} | 1.00 |")
        print(
            f"| render + OCR ({tp['ocr engine']}) + MiniLM, {tp['ocr pages']} pages | {tp['ocr pages/s']:.2f} | "
            f"{tp['ocr pages/s'] / tp['text-layer pages/s']:.3f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=list))


if __name__ == "__main__":
    main()
