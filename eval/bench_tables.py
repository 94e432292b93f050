"""What reading tables costs: every page of a folder of PDFs through `retrieval.tables.page_tables`, against
reading the same pages' text layer (what ingest does for each page anyway), in the same run.

    python -m eval.bench_tables                                   # the MMLongBench-Doc dev PDFs
    python -m eval.bench_tables --docs my_pdfs/ --limit 20        # the first 20 PDFs of a folder

Tables of a page with a text layer are built when the reader asks for them (cached per page), not at ingest;
this says what that costs per page, and what it would add to ingest if it were done there. Scanned pages get
their tables at ingest from the OCR boxes ingest already has; `vimrag index` prints that stage ("tables") in
its timing summary.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tqdm import tqdm

from eval.datasets import MMLB

DEV_DOCS = MMLB / "documents"


def measure(pdfs: list[Path]) -> dict[str, float]:
    """Seconds to read every page's text layer, seconds to build every page's tables, and what was found."""
    from retrieval.loaders import read_pdf
    from retrieval.tables import page_tables

    text_s = tables_s = 0.0
    pages = with_tables = tables = 0
    for pdf in tqdm(pdfs, desc="documents", unit="pdf", file=sys.stderr):
        t0 = time.perf_counter()
        try:
            texts = read_pdf(pdf)
        except Exception as e:  # noqa: BLE001 - a broken file is reported and skipped, as ingest does
            print(f"skipped {pdf.name}: {e}", file=sys.stderr)
            continue
        text_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        for pg in texts:
            if not pg.text.strip():
                continue  # a scanned page: its tables come from OCR at ingest
            found = page_tables.__wrapped__(str(pdf), pg.page)  # uncached: the cost of a first read
            pages += 1
            with_tables += bool(found)
            tables += len(found)
        tables_s += time.perf_counter() - t0
    return {
        "pages": pages,
        "pages_with_tables": with_tables,
        "tables": tables,
        "text_s": text_s,
        "tables_s": tables_s,
    }


def report(m: dict[str, float]) -> str:
    n = max(1, m["pages"])
    return "\n".join(
        [
            "| measure | value |",
            "|---|---|",
            f"| text-layer pages | {m['pages']:,} |",
            f"| pages with a table | {m['pages_with_tables']:,} ({100 * m['pages_with_tables'] / n:.0f}%) |",
            f"| tables | {m['tables']:,} |",
            f"| reading the text layer (baseline) | {m['text_s']:.1f} s ({1000 * m['text_s'] / n:.1f} ms/page) |",
            f"| building the tables | {m['tables_s']:.1f} s ({1000 * m['tables_s'] / n:.1f} ms/page) |",
            f"| tables / text layer | {m['tables_s'] / max(1e-9, m['text_s']):.2f}x |",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--docs", type=Path, default=DEV_DOCS, help="a folder of PDFs (default: the dev set's)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N PDFs, by name")
    args = ap.parse_args(argv)
    if not args.docs.is_dir():
        sys.exit(f"no folder {args.docs}; pass --docs DIR with PDFs (the dev set lives in ../shared/data)")
    pdfs = sorted(args.docs.glob("*.pdf"))[: args.limit or None]
    if not pdfs:
        sys.exit(f"{args.docs} holds no PDFs")
    print(report(measure(pdfs)))


if __name__ == "__main__":
    main()
