"""OCR quality and speed on rendered dev-set pages, measured against their PDF text layers.

Samples `--pages` pages (fixed seed, spread over the documents round-robin) from the MMLongBench-Doc PDFs
in ../shared/data, keeping pages whose text layer has at least 200 characters. Each page is rendered
with pypdfium2 and read by every available engine configuration; the page's text layer is the
reference. Reported per configuration:

- CER: Levenshtein distance / reference length, summed over pages (micro average), on NFKC-normalised,
  lower-cased text with whitespace runs collapsed to one space and line-end hyphenation joined
  (the same normalisation on both sides);
- CER no-ws: the same with all whitespace removed, so dropped spaces cost nothing and only misread
  characters (and reading order) remain;
- BoW F1: bag-of-words F1 between the word multisets, insensitive to reading order;
- pages/s of OCR alone (rendering excluded, models loaded before timing), and the CER and speed
  ratios against the baseline, measured in the same run: rapidocr-legacy at scale 2.0 (144 dpi), which is
  rapidocr's own loop on the whole page as the engine ran before issue 15 (`pipeline="rapidocr"`).

`--scanned N` also times N dev pages that have no text layer (the pages ingestion OCRs), rendered as
ingestion renders them. They have no reference text, so each configuration's words are compared with
the baseline's.

Caveat: a PDF text layer is an imperfect reference. Its order follows the producer's content stream
(multi-column pages, tables, headers and footers come in orders that no visual reading order matches),
it can hold text that is not visible, and it lacks text that is only drawn in images. CER therefore
mixes recognition errors with order differences; the bag-of-words F1 removes the order part. Rows
marked "lines" re-lay the same boxes without column detection (no extra OCR) to show what the
column-aware reading order is worth. Pages run through every configuration in turn, so load from other
processes on the machine affects all of them alike.

Left out on purpose: engines that need a model download, and per-language packs.

Run:  python -m eval.bench_ocr                 (60 pages, all variants, about 25 min on 2 cores)
      python -m eval.bench_ocr --pages 8 --variants rapidocr@2.0,tesseract@2.0   (quick look)
      python -m eval.bench_ocr --pages 40 --scanned 30 --variants rapidocr-legacy@2.0,rapidocr@2.0
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mmlongbench_doc" / "documents"
BASELINE = "rapidocr-legacy@2.0"
# name -> (engine, render scale, engine kwargs). Scale 2.0 = 144 dpi, what ingestion renders scanned pages at.
VARIANTS = {
    "rapidocr-legacy@2.0": ("rapidocr", 2.0, {"pipeline": "rapidocr"}),  # before issue 15
    "rapidocr@2.0": ("rapidocr", 2.0, {}),
    # the split pipeline as it was before retrieval.onnx_fold and 4-line batches
    "rapidocr-unfolded@2.0": ("rapidocr", 2.0, {"fold": False, "rec_batch": 8}),
    "rapidocr-det1024@2.0": ("rapidocr", 2.0, {"det_side": 1024}),
    "rapidocr-nogap@2.0": ("rapidocr", 2.0, {"split_gap": None}),
    "rapidocr-detfull@2.0": ("rapidocr", 2.0, {"det_side": None}),
    "rapidocr-rec40@2.0": ("rapidocr", 2.0, {"rec_height": 40}),
    "rapidocr@1.5": ("rapidocr", 1.5, {}),
    "rapidocr-stock@2.0": ("rapidocr", 2.0, {"space_prob": None}),
    "tesseract@2.0": ("tesseract", 2.0, {}),
    "tesseract@1.5": ("tesseract", 1.5, {}),
}
MIN_REF_CHARS = 200


# ---------------------------------------------------------------------------------------------------
# Metrics (pure functions)


def normalise(text: str) -> str:
    """NFKC, lower case, line-end hyphenation joined, control characters dropped, whitespace collapsed.

    >>> normalise("Fa\\ufffecilitate  the ﬁrst\\r\\nstep")
    'facilitate the first step'
    """
    text = text.replace("\ufffe", "-\n").replace("\u00ad", "-\n")  # pdfium marks soft hyphens with U+FFFE
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(c for c in text if c in "\n\t" or unicodedata.category(c)[0] != "C")
    text = re.sub(r"(\w)-[ \t]*\r?\n\s*(\w)", r"\1\2", text)
    return " ".join(text.split())


def edit_distance(a: str, b: str) -> int:
    from rapidfuzz.distance import Levenshtein

    return Levenshtein.distance(a, b)


def bow_f1(hyp: str, ref: str) -> float:
    """F1 between the multisets of words; 1.0 when both are empty.

    >>> round(bow_f1("the cat sat", "sat the dog"), 3)
    0.667
    """
    h, r = Counter(re.findall(r"\w+", hyp)), Counter(re.findall(r"\w+", ref))
    if not h and not r:
        return 1.0
    common = sum((h & r).values())
    if common == 0:
        return 0.0
    p, rc = common / sum(h.values()), common / sum(r.values())
    return 2 * p * rc / (p + rc)


@dataclass
class CharErrors:
    """Edit distance summed over pages, and the reference characters it is a fraction of."""

    dist: int = 0
    chars: int = 0

    def add(self, hyp: str, ref: str) -> int:
        d = edit_distance(hyp, ref)
        self.dist += d
        self.chars += len(ref)
        return d

    @property
    def rate(self) -> float:
        return self.dist / max(1, self.chars)


@dataclass
class Tally:
    """Running totals for one configuration: CER with and without spaces, per-page CER and word F1, seconds."""

    spaced: CharErrors = field(default_factory=CharErrors)
    unspaced: CharErrors = field(default_factory=CharErrors)  # word gaps dropped: recognition alone
    seconds: float = 0.0
    f1: list[float] = field(default_factory=list)
    page_cer: list[float] = field(default_factory=list)

    def add(self, hyp: str, ref: str, seconds: float | None) -> None:
        h, r = normalise(hyp), normalise(ref)
        d = self.spaced.add(h, r)
        self.unspaced.add(h.replace(" ", ""), r.replace(" ", ""))
        self.f1.append(bow_f1(h, r))
        self.page_cer.append(d / max(1, len(r)))
        if seconds is not None:
            self.seconds += seconds

    @property
    def pages(self) -> int:
        return len(self.f1)

    @property
    def cer(self) -> float:
        return self.spaced.rate

    @property
    def cer_nows(self) -> float:
        return self.unspaced.rate

    @property
    def pages_per_s(self) -> float | None:
        return self.pages / self.seconds if self.seconds else None


# ---------------------------------------------------------------------------------------------------
# Data


def sample_pages(docs_dir: Path, n: int, seed: int) -> list[tuple[Path, int, str]]:
    """(pdf, 0-based page, text layer) for n pages with enough text, spread round-robin over documents."""
    import pypdfium2 as pdfium

    rng = random.Random(seed)
    pdfs = sorted(docs_dir.glob("*.pdf"))
    rng.shuffle(pdfs)
    queues = []
    for path in pdfs:
        order = list(range(len(pdfium.PdfDocument(str(path)))))
        rng.shuffle(order)
        queues.append((path, order))
    picked: list[tuple[Path, int, str]] = []
    while len(picked) < n and any(order for _, order in queues):
        for path, order in queues:
            # Skip image-only pages until one with a usable reference turns up in this document.
            while order and len(picked) < n:
                i = order.pop()
                text = pdfium.PdfDocument(str(path))[i].get_textpage().get_text_range()
                if len(text.strip()) >= MIN_REF_CHARS:
                    picked.append((path, i, text))
                    break
    return picked


def sample_scanned(docs_dir: Path, n: int, seed: int) -> list[tuple[Path, int]]:
    """(pdf, 1-based page) for n pages that ingestion OCRs: text layer under `min_text_chars` characters."""
    from retrieval import loaders
    from retrieval.ingest import IngestConfig

    limit = IngestConfig().min_text_chars
    found = [
        (path, pg.page)
        for path in sorted(docs_dir.glob("*.pdf"))
        for pg in loaders.read_pdf(path)
        if len(pg.text) < limit
    ]
    random.Random(seed).shuffle(found)
    return found[:n]


def scanned_table(docs_dir: Path, n: int, seed: int, engines: dict) -> list[dict]:
    """Seconds per page on pages without a text layer, rendered as ingestion renders them.

    There is no reference text, so each configuration's output is compared with the baseline's
    (bag-of-words F1 against the baseline's words).
    """
    from tqdm import tqdm

    from retrieval import loaders
    from retrieval.ingest import IngestConfig

    dpi = IngestConfig().ocr_dpi
    pages = sample_scanned(docs_dir, n, seed)
    seconds = {v: 0.0 for v in engines}
    agree: dict[str, list[float]] = {v: [] for v in engines}
    rows = []
    for path, page in tqdm(pages, desc="scanned pages", unit="page"):
        image = loaders.render_pdf_page(path, page, dpi=dpi)
        texts = {}
        for v, eng in engines.items():
            t0 = time.perf_counter()
            texts[v] = normalise(eng.read(image).text)
            dt = time.perf_counter() - t0
            seconds[v] += dt
            rows.append({"doc": path.name, "page": page, "variant": v, "seconds": round(dt, 3), "scanned": True})
        if BASELINE in texts:
            for v in engines:
                agree[v].append(bow_f1(texts[v], texts[BASELINE]))
    print(
        f"\nOCR of {len(pages)} dev pages without a text layer (under {IngestConfig().min_text_chars} "
        f"characters), rendered at {dpi:g} dpi as ingestion does; no reference, so BoW F1 is against the "
        f"baseline's output\n"
    )
    print("| engine | s/page | speed / base | BoW F1 vs base |")
    print("|---|---|---|---|")
    for v in engines:
        per = seconds[v] / max(1, len(pages))
        ratio = f"{seconds[BASELINE] / seconds[v]:.2f}" if BASELINE in seconds and seconds[v] else "-"
        f1 = f"{statistics.mean(agree[v]):.3f}" if agree[v] else "-"
        print(f"| {v.split('@')[0]} | {per:.2f} | {ratio} | {f1} |")
    return rows


def render(path: Path, index: int, scale: float):
    import pypdfium2 as pdfium

    return pdfium.PdfDocument(str(path))[index].render(scale=scale).to_pil()


# ---------------------------------------------------------------------------------------------------


def make_engine(engine: str, kwargs: dict):
    from retrieval.ocr import TesseractEngine
    from retrieval.ocr_rapid import RapidOcrEngine

    return RapidOcrEngine(**kwargs) if engine == "rapidocr" else TesseractEngine(**kwargs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=60, help="number of pages to sample")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {list(VARIANTS)}")
    ap.add_argument("--docs", type=Path, default=DOCS, help="folder of PDFs")
    ap.add_argument(
        "--scanned",
        type=int,
        default=0,
        help="also time this many pages without a text layer (the pages ingestion OCRs)",
    )
    ap.add_argument("--out", type=Path, default=None, help="write per-page figures as JSON here")
    args = ap.parse_args(argv)

    from tqdm import tqdm

    from retrieval.ocr import available_engines, get_ocr
    from retrieval.reading_order import layout_text

    if not args.docs.is_dir():
        print(f"no PDFs at {args.docs}; pass --docs or put the shared data beside the repo", file=sys.stderr)
        return 2
    have = set(available_engines())
    wanted = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in wanted if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; choose from {list(VARIANTS)}")
    skipped = [v for v in wanted if VARIANTS[v][0] not in have]
    variants = [v for v in wanted if VARIANTS[v][0] in have]
    for v in skipped:
        print(f"skipping {v}: {VARIANTS[v][0]} is not installed", file=sys.stderr)
    if not variants:
        print("no OCR engine available", file=sys.stderr)
        return 2

    pages = sample_pages(args.docs, args.pages, args.seed) if args.pages else []
    print(f"{len(pages)} pages from {len({p for p, _, _ in pages})} documents (seed {args.seed})", file=sys.stderr)
    engines = {v: make_engine(VARIANTS[v][0], VARIANTS[v][2]) for v in variants}
    from PIL import Image

    warm = Image.new("RGB", (400, 100), "white")
    for eng in engines.values():
        eng.read(warm)  # load models before timing

    tallies = {v: Tally() for v in variants}
    relayout = {v: Tally() for v in variants if VARIANTS[v][1] == 2.0 and not VARIANTS[v][2]}
    rows = []
    for path, index, ref in tqdm(pages, desc="pages", unit="page"):
        images = {}
        for v in variants:
            scale = VARIANTS[v][1]
            if scale not in images:
                images[scale] = render(path, index, scale)
            t0 = time.perf_counter()
            result = engines[v].read(images[scale])
            dt = time.perf_counter() - t0
            tallies[v].add(result.text, ref, dt)
            if v in relayout:
                relayout[v].add(layout_text(result.boxes, columns=False), ref, None)
            rows.append(
                {
                    "doc": path.name,
                    "page": index + 1,
                    "variant": v,
                    "seconds": round(dt, 3),
                    "cer": round(tallies[v].page_cer[-1], 4),
                    "bow_f1": round(tallies[v].f1[-1], 4),
                }
            )

    if pages:
        print_table(len(pages), tallies, relayout)
    if args.scanned:
        at_ingest_dpi = {v: engines[v] for v in variants if VARIANTS[v][1] == 2.0}
        rows += scanned_table(args.docs, args.scanned, args.seed, at_ingest_dpi)
    auto = get_ocr("auto")
    print(f"\nget_ocr('auto') -> {auto.name if auto else None} (available: {', '.join(sorted(have))})")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


def print_table(n_pages: int, tallies: dict[str, Tally], relayout: dict[str, Tally]) -> None:
    base = tallies.get(BASELINE)
    print(
        f"\nOCR on {n_pages} rendered MMLongBench-Doc pages; reference = PDF text layer; "
        f"baseline = {BASELINE if base else 'none (baseline not run)'}\n"
    )
    print(
        "| engine | scale | reading order | CER | CER no-ws | median page CER | BoW F1 | pages/s "
        "| CER / base | speed / base |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    all_rows = [(v, "columns", t) for v, t in tallies.items()] + [(v, "lines", t) for v, t in relayout.items()]
    for v, order, t in all_rows:
        name, scale = v.split("@")
        pps = t.pages_per_s
        cer_ratio = f"{t.cer / base.cer:.2f}" if base and base.cer else "-"
        speed_ratio = f"{pps / base.pages_per_s:.2f}" if base and pps and base.pages_per_s else "-"
        print(
            f"| {name} | {scale} | {order} | {t.cer:.3f} | {t.cer_nows:.3f} | {statistics.median(t.page_cer):.3f} "
            f"| {statistics.mean(t.f1):.3f} | {f'{pps:.3f}' if pps else '-'} | {cer_ratio} | {speed_ratio} |"
        )


if __name__ == "__main__":
    raise SystemExit(main())
