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
