"""Shared fixtures: offline environment, a generated mixed corpus, and the optional ../shared data."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

# The files that take longest, longest first (measured in one process with --durations on a quiet 2-core box).
# They run first so that, on pytest-xdist workers (scripts/test.sh, a file's tests on one worker), no long file
# starts last while the other worker sits idle; within a file the order is unchanged.
LONGEST_FIRST = (
    "tests/rl/test_trainer.py",
    "tests/retrieval/test_milvus_server.py",
    "tests/rl/test_synth.py",
    "tests/rl/test_gym.py",
    "tests/retrieval/test_sharded_ingest.py",
    "tests/retrieval/test_remote.py",
    "tests/app/test_web.py",
    "tests/app/test_browser.py",
    "tests/rl/test_served.py",
    "tests/agent/test_smollm.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda it: rank.get(Path(str(it.fspath)).relative_to(REPO).as_posix(), len(rank)))


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread_per_worker():
    """On pytest-xdist workers torch computes on one thread: two workers on two cores, each with a team of OpenMP
    threads, oversubscribe them, and idle OpenMP threads spin. A single process keeps torch's default."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)
    yield


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
