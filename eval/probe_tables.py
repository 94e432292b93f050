"""Finding tables, compared: retrieval/tables.py against pdfplumber's finder (ruling lines, and its text strategy)
on the text-layer gold pages of the MMLongBench-Doc dev questions whose evidence is a table.

    pip install pdfplumber            # for this probe only; not a dependency of vimrag
    python -m eval.probe_tables

For each finder: the pages where it finds a table of two or more rows and columns, the pages where some cell of
those tables equals the question's gold answer, and seconds per page (eval/RESULTS.md, "Finding tables").
"""

from __future__ import annotations

import json
import re
import sys
import time

from eval.bench_tables import DEV_DOCS

STRATEGIES = {"pdfplumber-lines": {}, "pdfplumber-text": {"vertical_strategy": "text", "horizontal_strategy": "text"}}


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", str(text).lower())


def main() -> None:
    try:
        import pdfplumber
    except ImportError:
        sys.exit("this probe compares against pdfplumber: pip install pdfplumber")
    from retrieval.tables import page_tables

    rows = [json.loads(line) for line in open(DEV_DOCS.parent / "mmlongbench_doc.jsonl")]
    golds: dict[tuple[str, int], set[str]] = {}
    for r in rows:
        if "Table" in str(r["evidence_sources"]):
            for p in r["evidence_pages"]:
                golds.setdefault((r["doc"], p), set()).add(_norm(str(r["answer"]).strip("[]'\" ")))
    stats = {k: [0, 0, 0.0] for k in ("retrieval/tables.py", *STRATEGIES)}
    n = 0
    for (doc, p), want in sorted(golds.items()):
        path = str(DEV_DOCS.parent / doc)
        with pdfplumber.open(path) as pdf:
            if p > len(pdf.pages) or len((pdf.pages[p - 1].extract_text() or "").strip()) < 30:
                continue  # a scanned page: no text layer to compare on
            n += 1
            for name, settings in STRATEGIES.items():
                t0 = time.perf_counter()
                found = [t for t in pdf.pages[p - 1].extract_tables(settings) if len(t) >= 2 and max(map(len, t)) >= 2]
                stats[name][2] += time.perf_counter() - t0
                stats[name][0] += bool(found)
                stats[name][1] += bool({_norm(c) for t in found for r in t for c in r if c} & want)
        t0 = time.perf_counter()
        ours = page_tables.__wrapped__(path, p)
        stats["retrieval/tables.py"][2] += time.perf_counter() - t0
        stats["retrieval/tables.py"][0] += bool(ours)
        cells = {_norm(x) for t in ours for r in t.rows for c in r for x in (c, c.split(" (")[0])}
        stats["retrieval/tables.py"][1] += bool(cells & want)
    print(f"{n} text-layer gold pages of table-sourced dev questions\n")
    print("| finder | pages with a table | pages where a cell is the gold answer | s / page |\n|---|---|---|---|")
    for name, (found, hit, secs) in stats.items():
        print(f"| {name} | {found} | {hit} | {secs / max(1, n):.3f} |")


if __name__ == "__main__":
    main()
