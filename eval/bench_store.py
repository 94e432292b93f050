"""The local store (SQLite + FAISS) against Milvus Lite, each measured beside the other in one run.

    python -m eval.bench_store dev        # the MMLongBench-Doc dev corpus into both: ingest time, R@5 / NDCG@5
    python -m eval.bench_store vectors    # 1M synthetic vectors: build time, p50/p95, recall@10, peak memory

`dev` indexes the dev PDFs from scratch into a local index and into a Milvus Lite one, with one embedder and OCR
engine loaded beforehand for both (model loading is outside the timings), then scores page recall and NDCG@5 of
hybrid and dense search, corpus-wide and doc-scoped, with eval/bench_retrieval.py's own scoring. Quick run:
`python -m eval.bench_store dev --docs 10`. Needs ../shared/data/mmlongbench_doc.

`vectors` builds each store in its own subprocess (so peak RSS is that store's alone) over `--n` mixture vectors
of dim 384 (eval/bench_vectors_data.py), then times `--queries` single queries and scores recall@10 against exact
search. The local store is its `VectorIndex` (IVF at this size, the shipped defaults); Milvus Lite gets the same
vectors through pymilvus, with its default index (AUTOINDEX). Quick run: `--n 100000`.

The search server's requests/s with 1 and 2 workers is `python -m eval.bench_server --workers 1,2`.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from eval.bench_retrieval import DATA, load_questions, quality

OUT = Path("bench_out")


# ---------------------------------------------------------------------------------------------- dev corpus
def bench_dev(args) -> dict:
    from retrieval.embedders import load_embedder
    from retrieval.ingest import Indexer, IngestConfig
    from retrieval.ocr import get_ocr
    from retrieval.retriever import Retriever

    data = Path(args.data)
    if not (data / "mmlongbench_doc.jsonl").exists():
        raise SystemExit(f"no MMLongBench-Doc data at {data}; pass --data")
    pdfs = sorted((data / "documents").glob("*.pdf"), key=lambda p: p.stat().st_size)
    pdfs = pdfs[: args.docs] if args.docs else pdfs
    questions = load_questions(data, {p.name for p in pdfs})
    emb, ocr = load_embedder("minilm"), get_ocr("auto")
    figures: dict = {"pdfs": len(pdfs), "questions": len(questions)}
    root = Path(args.out) / "store_dev"
    for store in ("local", "milvus-lite"):
        idx = root / store
        if idx.exists() and not args.reuse:
            shutil.rmtree(idx)
        t = time.perf_counter()
        s = Indexer(idx, IngestConfig(store=store), embedder=emb, ocr=ocr).index(pdfs, progress=True)
        secs = time.perf_counter() - t
        r = Retriever(idx, embedder=emb)
        row = {"ingest_s": secs, "units": s.total_units, "indexed": s.units_indexed}
        for scoped in (False, True):
            q = quality(r, questions, scoped, modes=("hybrid", "dense"))
            row["doc-scoped" if scoped else "corpus-wide"] = q
        t = time.perf_counter()
        for q in questions[:100]:
            r.search(q["question"], k=10)
        row["hybrid_ms"] = (time.perf_counter() - t) * 10  # per query, over 100 (their embeddings are cached by now)
        figures[store] = row
        print(f"{store}: {json.dumps(row, indent=1)}", flush=True)
    loc, mil = figures["local"], figures["milvus-lite"]
    print(f"\n### {len(pdfs)} dev PDFs, {loc['units']} pages, {len(questions)} questions\n")
    print("| store | ingest s | ratio | scope | R@5 hybrid | NDCG@5 hybrid | R@5 dense | NDCG@5 dense | search ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, row in (("local", loc), ("milvus-lite", mil)):
        for scope in ("corpus-wide", "doc-scoped"):
            h, d = row[scope]["hybrid"], row[scope]["dense"]
            print(
                f"| {name} | {row['ingest_s']:.0f} | {row['ingest_s'] / loc['ingest_s']:.2f} | {scope} | "
                f"{h['R@5']:.3f} | {h['NDCG@5']:.3f} | {d['R@5']:.3f} | {d['NDCG@5']:.3f} | {row['hybrid_ms']:.1f} |"
            )
    for scope in ("corpus-wide", "doc-scoped"):
        gap = abs(mil[scope]["hybrid"]["R@5"] - loc[scope]["hybrid"]["R@5"])
        print(f"{scope}: hybrid R@5 differs by {gap:.4f} ({'within' if gap <= 0.01 else 'NOT within'} 0.01)")
    return figures


# ---------------------------------------------------------------------------------------------- 1M vectors
def _data(n: int, nq: int, dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    from eval.bench_vectors_data import mixture, random_units

    rng = np.random.default_rng(seed)
    centres = random_units(1000, dim, rng)
    return mixture(n, centres, 1.0, rng), mixture(nq, centres, 1.0, rng)


def vectors_worker(store: str, n: int, nq: int, dim: int, tmp: str) -> dict:
    """Build one store over the vectors, time its queries; runs in a subprocess of its own."""
    xb, xq = _data(n, nq, dim)
    ids = np.arange(n, dtype=np.int64)
    out: dict = {"store": store}
    if store == "local":
        from retrieval.index import VectorIndex

        t = time.perf_counter()
        idx = VectorIndex(dim).build(ids, xb)
        out["build_s"] = time.perf_counter() - t
        out["kind"] = idx.kind

        def search(q):
            return idx.search(q[None, :], 10)[1][0]
    else:
        from pymilvus import DataType, MilvusClient

        client = MilvusClient(str(Path(tmp) / "vec.db"))
        s = client.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", DataType.INT64, is_primary=True)
        s.add_field("vec", DataType.FLOAT_VECTOR, dim=dim)
        ip = client.prepare_index_params()
        ip.add_index("vec", index_type="AUTOINDEX", metric_type="IP")
        t = time.perf_counter()
        client.create_collection("v", schema=s, index_params=ip, consistency_level="Strong")
        for a in range(0, n, 10_000):
            rows = [{"id": int(i), "vec": v} for i, v in zip(ids[a : a + 10_000], xb[a : a + 10_000].tolist())]
            client.insert("v", rows)
        client.flush("v")
        client.load_collection("v")
        out["build_s"] = time.perf_counter() - t
        out["kind"] = "AUTOINDEX"

        def search(q):
            res = client.search("v", data=[q.tolist()], anns_field="vec", limit=10, search_params={"metric_type": "IP"})
            return np.array([h["id"] for h in res[0]], dtype=np.int64)

    for q in xq[:2]:
        search(q)
    times, found = [], []
    for q in xq:
        t = time.perf_counter()
        found.append(search(q))
        times.append((time.perf_counter() - t) * 1e3)
    truth = np.argsort(-(xq @ xb.T), axis=1)[:, :10]  # exact top-10
    out["recall@10"] = float(np.mean([len(set(f.tolist()) & set(t.tolist())) / 10 for f, t in zip(found, truth)]))
    out["p50_ms"], out["p95_ms"] = float(np.percentile(times, 50)), float(np.percentile(times, 95))
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def bench_vectors(args) -> dict:
    rows = []
    for store in args.stores.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "eval.bench_store", "_vectors-worker", store, str(args.n), str(args.queries)]
            run = subprocess.run([*cmd, str(args.dim), tmp], capture_output=True, text=True, check=False)
            if run.returncode != 0:
                raise SystemExit(f"{store} worker failed:\n{run.stderr[-3000:]}")
            rows.append(json.loads(run.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    base = rows[0]  # the first store given (local by default) is the baseline
    print(f"\n### {args.n:,} vectors of dim {args.dim}, {args.queries} single queries, k=10\n")
    print("| store | index | build s | p50 ms | p95 ms | recall@10 | peak RSS MiB | p50 / local |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['store']} | {r['kind']} | {r['build_s']:.1f} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | "
            f"{r['recall@10']:.3f} | {r['peak_rss_mib']:.0f} | {r['p50_ms'] / base['p50_ms']:.1f} |"
        )
    return {"vectors": rows}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_vectors-worker":
        store, n, nq, dim, tmp = argv[1:]
        print(json.dumps(vectors_worker(store, int(n), int(nq), int(dim), tmp)))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    d = sub.add_parser("dev", help="the dev corpus in both stores: ingest time, R@5 and NDCG@5")
    d.add_argument("--data", default=str(DATA))
    d.add_argument("--docs", type=int, default=0, help="only the N smallest PDFs (0 = all)")
    d.add_argument("--out", default=str(OUT), help="the two indexes go under OUT/store_dev")
    d.add_argument("--reuse", action="store_true", help="keep indexes built by an earlier run (ingest time then ~0)")
    v = sub.add_parser("vectors", help="synthetic vectors in both stores: build, latency, recall, memory")
    v.add_argument("--n", type=int, default=1_000_000)
    v.add_argument("--queries", type=int, default=200)
    v.add_argument("--dim", type=int, default=384)
    v.add_argument("--stores", default="local,milvus-lite", help="which stores to build, in order")
    for p in (d, v):
        p.add_argument("--json", help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    figures = bench_dev(args) if args.what == "dev" else bench_vectors(args)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
