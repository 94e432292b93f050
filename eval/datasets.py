"""Evaluation datasets: a small registry that turns benchmark files into uniform items with their corpus.

    ds = load_dataset("mmlongbench-doc-smoke")          # the 160-question dev smoke set in ../shared/data
    ds = load_dataset("jsonl:my_questions.jsonl", corpus="my_docs/")
    ds = load_dataset("vidoseek:vidoseek.json", corpus="vidoseek_pdfs/")
    ds.items[0].question, ds.items[0].answers, ds.items[0].evidence, ds.corpus

Names:
- `mmlongbench-doc` (543 dev questions) and `mmlongbench-doc-smoke` (160): the JSONL in
  ../shared/data/mmlongbench_doc (fields in its README); each question is about one PDF, and the runner
  searches only that PDF by default, as the benchmark intends.
- `demo`: assets/questions.jsonl over assets/corpus.
- `jsonl:PATH`: the generic format, one object per line: `id, question, answer[]` (acceptable answers),
  `evidence[]` of `{"file", "page"?, "time"?: [start, end]}` or `"dir/file.pdf#page=N"` strings (or `doc` with
  `evidence_pages[]`; pages 1-based unless `page_base=0`), and optionally `answer_format`,
  `evidence_sources`, `doc_type`, `doc` (restrict the search to that file).
- `vidoseek:PATH`, `slidevqa:PATH`: VRAG's unified JSON (`uid, query, reference_answer,
  meta_info{file_name, reference_page[], source_type, query_type, doc_type?, answer_format?}`), as a list,
  `{"examples": [...]}` (VRAG-RL/examples/rag_dataset.json) or JSONL; `query_type` is the question type.
  `reference_page` is read as 1-indexed; pass `page_base=0` when a file counts from 0.

Every dataset declares its corpus (files or folders); the runner builds or reuses an index of it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.units import page_id, page_image_name

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
MMLB = SHARED / "mmlongbench_doc"


@dataclass
class Gold:
    """One piece of gold evidence: a file, optionally a 1-indexed page, a time span in seconds, or a text file's
    0-indexed chunk (the unit's `chunk`, as the index numbers them)."""

    file: str  # file name (matched against the unit's source by name)
    page: int | None = None
    time: tuple[float, float] | None = None
    chunk: int | None = None

    def key(self) -> tuple:
        """What identifies the evidence; a chunk adds itself, so keys made before chunks existed read the same."""
        base = (self.file, self.page, self.time)
        return base if self.chunk is None else (*base, self.chunk)

    def matches(self, unit: dict[str, Any]) -> bool:
        """Whether a retrieved unit (Unit.to_dict()) is this evidence. Pages compare by retrieval.units.page_id,
        so page 3 of X.pdf is the indexed PDF page or the page image X_3.jpg alike."""
        if self.chunk is not None:  # one chunk of a text file
            return Path(unit.get("source", "")).name == self.file and unit.get("chunk") == self.chunk
        if self.page is None and self.time is None and Path(unit.get("source", "")).name == self.file:
            return True  # the file itself, named as it is (a gold "X_3.jpg")
        doc, page = page_id(unit)
        if doc != self.file:
            return False
        if self.page is not None:
            return page == self.page
        if self.time is not None and unit.get("start") is not None:
            a, b = self.time
            return not ((unit.get("end") or unit["start"]) < a or unit["start"] > b)
        return True


@dataclass
class EvalItem:
    id: str
    question: str
    answers: list[str]  # acceptable answers (MMLongBench-Doc: exactly one)
    evidence: list[Gold] = field(default_factory=list)
    answer_format: str = ""  # MMLongBench-Doc: Str | Int | Float | List | None
    evidence_sources: list[str] = field(default_factory=list)
    doc_type: str = ""
    question_type: str = ""  # e.g. ViDoSeek's / SlideVQA's query_type (Single-Hop, Multi-Hop, ...)
    doc: str = ""  # the one file this question is about, when the dataset says so
    evidence_ok: bool = True  # False: the gold pages are known to be wrong (left out of retrieval metrics)


@dataclass
class Dataset:
    name: str
    items: list[EvalItem]
    corpus: list[Path]  # files or folders to index
    default_index: Path  # where its index is built unless the user names one
    per_doc: bool = False  # questions name their document, and search defaults to that document

    def describe(self) -> str:
        return f"{self.name}: {len(self.items)} questions over {', '.join(str(c) for c in self.corpus)}"


class DatasetError(ValueError):
    """A dataset name, file or corpus is wrong; the message says which and how to fix it."""


def _need(path: Path, what: str, hint: str) -> Path:
    if not path.exists():
        raise DatasetError(f"{what} {path} does not exist; {hint}")
    return path


def read_records(path: Path) -> list[dict[str, Any]]:
    """JSON (a list, or {"examples"|"data": [...]}) or JSONL; JSONL errors name the line."""
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None  # JSONL (several objects), or broken: parsed line by line below
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        return data.get("examples") or data.get("data") or [data]
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise DatasetError(f"{path}:{i}: not valid JSON ({e.msg})") from e
    return rows


def _required(row: dict, keys: tuple[str, ...], where: str) -> None:
    missing = [k for k in keys if k not in row]
    if missing:
        raise DatasetError(f"{where}: missing field(s) {missing}; each question needs {list(keys)}")


# -- loaders -----------------------------------------------------------------------------------------
def _mmlongbench(path: Path, name: str) -> Dataset:
    _need(path, "MMLongBench-Doc questions", f"the dev data lives in {MMLB} (../shared/data beside the repo)")
    items = []
    for r in read_records(path):
        doc = Path(r["doc"]).name
        ok = r.get("evidence_ok", True)
        items.append(
            EvalItem(
                id=r["id"],
                question=r["question"],
                answers=[str(a) for a in r["answer"]],
                evidence=[Gold(doc, int(p)) for p in r.get("evidence_pages") or []],
                answer_format=r.get("answer_format", ""),
                evidence_sources=list(r.get("evidence_sources") or []),
                doc_type=r.get("doc_type", ""),
                doc=doc,
                evidence_ok=ok,
            )
        )
    return Dataset(name, items, [MMLB / "documents"], REPO / "bench_out" / "mmlb_idx", per_doc=True)


_PAGE_REF = re.compile(r"^(?P<file>.+?)#page=(?P<page>\d+)$")


def gold_of(e: Any, page_base: int = 1, where: str = "") -> Gold:
    """One evidence entry in the forms people write: "file", "dir/file.pdf#page=N", or {"file", "page"?,
    "time"?, "chunk"?}; pages are read as `page_base`-based (1 unless the file counts from 0), chunks from 0.

    >>> gold_of("documents/X.pdf#page=60"), gold_of({"file": "a/b.png"}).file, gold_of("X.pdf#page=0", 0).page
    (Gold(file='X.pdf', page=60, time=None, chunk=None), 'b.png', 1)
    >>> gold_of({"file": "notes.md", "chunk": 2}).chunk
    2
    """
    if isinstance(e, str):
        m = _PAGE_REF.match(e.strip())
        if m:
            return Gold(Path(m.group("file")).name, int(m.group("page")) + 1 - page_base)
        return Gold(Path(e.strip()).name)
    if not isinstance(e, dict) or not e.get("file"):
        raise DatasetError(
            f'{where}: evidence {e!r} must be a file name, \'file#page=N\' or {{"file": ..., "page": N}}'
        )
    t = e.get("time")
    page = int(e["page"]) + 1 - page_base if e.get("page") is not None else None
    chunk = int(e["chunk"]) if e.get("chunk") is not None else None
    return Gold(Path(e["file"]).name, page, (float(t[0]), float(t[1])) if t else None, chunk)


def check_evidence(ds: Dataset, items: list[EvalItem] | None = None) -> list[str]:
    """Problems with the gold evidence of `items` against the corpus: a file the corpus lacks, or a PDF page
    beyond the file's page count. One line per problem, naming the question. Empty when all is well."""
    files: dict[str, Path] = {}
    page_images: dict[str, set[int]] = {}  # X.pdf -> the N of its page images X_N.jpg in the corpus
    for c in ds.corpus:
        c = Path(c)
        for f in [c] if c.is_file() else sorted(p for p in c.rglob("*") if p.is_file()):
            files.setdefault(f.name, f)
            named = page_image_name(f.name)
            if named:
                page_images.setdefault(named[0], set()).add(named[1])
    pages: dict[str, int] = {}
    out = []
    for it in items if items is not None else ds.items:
        if not it.evidence_ok:
            continue
        for g in it.evidence:
            f = files.get(g.file)
            if f is None and g.file in page_images:  # a VRAG corpus of page images without its PDFs
                if g.page is not None and g.page not in page_images[g.file]:
                    stem = g.file.removesuffix(".pdf")
                    out.append(
                        f"{it.id}: evidence page {g.page} of {g.file} has no page image {stem}_{g.page}.* "
                        f"in the corpus (pages count from 1; --page-base 0 if the file counts from 0)"
                    )
                continue
            if f is None:
                out.append(f"{it.id}: evidence file {g.file!r} is not in the corpus")
                continue
            if g.page is not None and f.suffix.lower() == ".pdf":
                if g.file not in pages:
                    try:
                        import pypdfium2 as pdfium

                        doc = pdfium.PdfDocument(str(f))
                        pages[g.file] = len(doc)
                        doc.close()
                    except Exception:  # noqa: BLE001 - an unreadable PDF is the indexer's to report
                        pages[g.file] = 10**9
                if not 1 <= g.page <= pages[g.file]:
                    out.append(
                        f"{it.id}: evidence page {g.page} of {g.file} is outside its "
                        f"{pages[g.file]} pages (pages count from 1; --page-base 0 if the file counts from 0)"
                    )
    return out


def _generic(path: Path, corpus: str | Path | None, name: str, page_base: int = 1) -> Dataset:
    _need(path, "question file", "give an existing JSONL file: jsonl:PATH")
    items = []
    for i, r in enumerate(read_records(path), 1):
        _required(r, ("question", "answer"), f"{path} question {i}")
        answers = r["answer"] if isinstance(r["answer"], list) else [r["answer"]]
        ev = [gold_of(e, page_base, f"{path} question {i}") for e in r.get("evidence") or []]
        if r.get("doc") and r.get("evidence_pages"):  # MMLongBench-Doc's own shape
            ev += [
                Gold(Path(r["doc"]).name, int(p) + 1 - page_base)
                for p in r["evidence_pages"]
                if Gold(Path(r["doc"]).name, int(p) + 1 - page_base).key() not in {g.key() for g in ev}
            ]
        items.append(
            EvalItem(
                id=str(r.get("id", f"q{i:04d}")),
                question=r["question"],
                answers=[str(a) for a in answers],
                evidence=ev,
                answer_format=r.get("answer_format", ""),
                evidence_sources=list(r.get("evidence_sources") or r.get("needs") or []),
                doc_type=r.get("doc_type", ""),
                doc=Path(r["doc"]).name if r.get("doc") else "",
                evidence_ok=r.get("evidence_ok", True),
            )
        )
    folder = Path(corpus) if corpus else path.parent / "corpus"
    _need(folder, "corpus", "pass the folder of documents these questions are about with --corpus DIR")
    return Dataset(
        name,
        items,
        [folder],
        REPO / "bench_out" / f"idx_{path.stem}",
        per_doc=all(it.doc for it in items) and bool(items),
    )


def _vrag(path: Path, corpus: str | Path | None, name: str, page_base: int = 1) -> Dataset:
    _need(path, f"{name.split(':')[0]} question file", "download it (see the README's evaluation section)")
    if corpus is None:
        raise DatasetError(f"{name} needs its documents: pass --corpus DIR (the PDFs or page images)")
    _need(Path(corpus), "corpus", "pass the folder of the benchmark's documents with --corpus DIR")
    items = []
    for i, r in enumerate(read_records(path), 1):
        _required(r, ("query", "reference_answer"), f"{path} question {i}")
        meta = r.get("meta_info") or {}
        file = Path(meta.get("file_name", "")).name
        pages = [int(p) + (1 - page_base) for p in meta.get("reference_page") or []]
        sources = meta.get("source_type") or []  # "Chart" or ["Chart", "Table"]: both occur in VRAG's files
        items.append(
            EvalItem(
                id=str(r.get("uid", f"q{i:05d}")),
                question=r["query"],
                answers=[str(r["reference_answer"])],
                evidence=[Gold(file, p) for p in pages] if file else [],
                evidence_sources=[str(x) for x in ([sources] if isinstance(sources, str) else sources)],
                answer_format=str(meta.get("answer_format") or ""),
                doc_type=str(meta.get("doc_type") or ""),
                question_type=str(meta.get("query_type") or ""),
                doc="",
            )
        )
    return Dataset(name, items, [Path(corpus)], REPO / "bench_out" / f"idx_{path.stem}")


def load_dataset(name: str, corpus: str | Path | None = None, page_base: int = 1) -> Dataset:
    """A dataset by registry name or `kind:PATH` (see the module docstring)."""
    if name == "mmlongbench-doc":
        return _mmlongbench(MMLB / "mmlongbench_doc.jsonl", name)
    if name == "mmlongbench-doc-smoke":
        return _mmlongbench(MMLB / "mmlongbench_doc.smoke.jsonl", name)
    if name == "demo":
        return _generic(REPO / "assets" / "questions.jsonl", corpus or REPO / "assets" / "corpus", name)
    kind, sep, rest = name.partition(":")
    if sep and kind == "jsonl":
        return _generic(Path(rest), corpus, name, page_base)
    if sep and kind in ("vidoseek", "slidevqa"):
        return _vrag(Path(rest), corpus, name, page_base)
    raise DatasetError(f"unknown dataset {name!r}; use one of {DATASETS} or jsonl:PATH / vidoseek:PATH / slidevqa:PATH")


DATASETS = ["mmlongbench-doc", "mmlongbench-doc-smoke", "demo"]
