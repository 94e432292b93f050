"""Shared fixtures: offline environment, a generated mixed corpus, and the optional ../shared data."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The same vectors on every CI machine: `auto` would pick bf16 where the CPU has it (retrieval/precision.py).
# tests/retrieval/test_precision.py sets auto and bf16 itself.
os.environ.setdefault("VIMRAG_PRECISION", "fp32")
# Each pytest-xdist worker gets its share of the cores for torch (OpenMP), ONNX Runtime and FAISS. Every library
# sizes its pool to the whole machine by default, so two workers on two cores ran four busy threads: ten files of
# the suite took 226 s that way against 161-172 s with one thread per worker, back to back on the 2-core box
# (2026-11-28; docs/development.md has the runs). The one-process run keeps the libraries' defaults.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
if _WORKERS > 1:
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "VIMRAG_TEXT_THREADS", "VIMRAG_FAISS_THREADS"):
        os.environ.setdefault(_var, str(max(1, (os.cpu_count() or 1) // _WORKERS)))

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data, or a clean skip when this checkout has no shared folder beside it."""
    if not (SHARED_DATA / "mmlongbench_doc").is_dir():
        pytest.skip(f"needs the benchmark data at {SHARED_DATA} (absent here)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def mixed_corpus(tmp_path_factory) -> Path:
    """A generated corpus with a PDF, an image, a video and a markdown file (assets/make_corpus.py)."""
    from assets.make_corpus import make_corpus

    out = tmp_path_factory.mktemp("corpus")
    make_corpus(out)
    return out


@pytest.fixture(scope="session")
def mixed_index(mixed_corpus, tmp_path_factory) -> Path:
    """The mixed corpus indexed once with the default embedder and OCR (read-only for the tests using it)."""
    from retrieval.ingest import Indexer

    idx = tmp_path_factory.mktemp("mixed_idx")
    Indexer(idx).index([mixed_corpus], progress=False)
    return idx


@pytest.fixture(scope="session")
def bundled_index(tmp_path_factory) -> Path:
    """The bundled demo corpus (assets/corpus) indexed once with the defaults (read-only for its tests)."""
    from retrieval.ingest import Indexer

    idx = tmp_path_factory.mktemp("bundled_idx")
    Indexer(idx).index([REPO / "assets" / "corpus"], progress=False)
    return idx
