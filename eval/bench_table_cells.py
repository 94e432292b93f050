"""How right the tables we find are: cells of `retrieval/tables.py`'s tables on dev pages, each checked by hand
against the rendered page, and how fast the pages are read.

    python -m eval.bench_table_cells                     # the checked cells: accuracy, and pages per second
    python -m eval.bench_table_cells --sample 5          # fresh cells to check: five per page, seed 55, and a
                                                         # PNG of each page's table in runs/table_cells/

eval/table_cells_checked.jsonl holds the verdicts: 110 cells, five drawn at random from the tables found on each
of 22 dev pages with a table (18 documents: papers, surveys, statements, manuals, a brochure; seed 55, and seed 56
for the last four pages added). A cell
is right when its value is the one the page prints in its row (`value_right`), and the column header we read
names its column (`header_right`); `why` says what went wrong. Labels, headers and values are kept to 40
characters, with a hash of the whole cell: a cell whose hash no longer matches was changed by the builder since it
was checked, and is reported as such, not counted, until it is checked again (`--sample`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
from collections import Counter
from pathlib import Path

from eval.bench_tables import DEV_DOCS

CHECKED = Path(__file__).with_name("table_cells_checked.jsonl")


def cell_hash(label: str, header: str, value: str) -> str:
    return hashlib.sha1("\x1f".join((label, header, value)).encode()).hexdigest()[:12]


def _tables(doc: str, page: int):
    from retrieval.tables import page_tables

    return page_tables.__wrapped__(str(DEV_DOCS / doc), page)  # not the cache: each page is timed


def score(checked: list[dict]) -> dict:
    """The checked cells against today's tables: counts, and seconds to build the pages' tables."""
    pages = sorted({(c["doc"], c["page"]) for c in checked})
    found, secs = {}, 0.0
    for doc, page in pages:
        t0 = time.perf_counter()
        found[doc, page] = _tables(doc, page)
        secs += time.perf_counter() - t0
    out = Counter(pages=len(pages), cells=len(checked))
    wrong: Counter = Counter()
    per_page: dict = {}
    for c in checked:
        tables = found[c["doc"], c["page"]]
        try:
            t = tables[c["table"]]
            now = cell_hash(t.rows[c["row"]][0], t.header[c["col"]], t.rows[c["row"]][c["col"]])
        except IndexError:
            now = ""
        if now != c["sha1"]:
            out["changed"] += 1
            continue
        right = c["value_right"] and c["header_right"]
        out["value_right"] += c["value_right"]
        out["right"] += right
        per_page.setdefault((c["doc"], c["page"]), []).append(right)
        if not right:
            wrong[c["why"]] += 1
    out["pages_all_right"] = sum(all(v) for v in per_page.values())
    return {"counts": dict(out), "seconds": secs, "wrong": wrong}


def sample(per_page: int, seed: int, out: Path) -> None:
    """Print `per_page` random cells of each checked page's tables, with a PNG of each page's table to read them."""
    import pypdfium2 as pdfium

    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    pages = sorted({(c["doc"], c["page"]) for c in _load()})
    for i, (doc, page) in enumerate(pages):
        tables = _tables(doc, page)
        cells = [(ti, r, c) for ti, t in enumerate(tables) for r, row in enumerate(t.rows) for c in range(1, len(row))]
        print(f"## {i:02d} {doc} p.{page}")
        for ti, r, c in sorted(rng.sample(cells, min(per_page, len(cells)))):
            t = tables[ti]
            print(f"   t{ti} r{r} c{c}: row={t.rows[r][0]!r} | col={t.header[c]!r} | value={t.rows[r][c]!r}")
        pdf = pdfium.PdfDocument(str(DEV_DOCS / doc))
        try:
            pdf[page - 1].render(scale=1.5).to_pil().save(out / f"{i:02d}.png")
        finally:
            pdf.close()


def _load() -> list[dict]:
    return [json.loads(line) for line in CHECKED.read_text().splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=0, help="print N fresh cells per page to check by hand")
    ap.add_argument("--seed", type=int, default=55)
    ap.add_argument("--out", type=Path, default=Path("runs/table_cells"))
    args = ap.parse_args()
    if not DEV_DOCS.is_dir():
        raise SystemExit(f"the dev PDFs are not at {DEV_DOCS}: see docs/evaluation.md for ../shared/data")
    if args.sample:
        sample(args.sample, args.seed, args.out)
        return
    got = score(_load())
    n = got["counts"]
    counted = n["cells"] - n.get("changed", 0)
    print(f"{n['pages']} pages, {n['cells']} cells checked by hand ({n.get('changed', 0)} changed since: check again)")
    print(f"cell accuracy (value in its row, header naming its column): {n.get('right', 0)}/{counted}")
    print(f"value accuracy (value in its row, whatever the header):     {n.get('value_right', 0)}/{counted}")
    print(f"pages whose checked cells are all right: {n['pages_all_right']}/{n['pages']}")
    print(f"tables built in {got['seconds']:.2f} s: {n['pages'] / max(got['seconds'], 1e-9):.1f} pages/s")
    print("what the wrong cells show:")
    for why, k in got["wrong"].most_common():
        print(f"  {k:3d}  {why}")


if __name__ == "__main__":
    main()
