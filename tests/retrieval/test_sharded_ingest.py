"""Data-parallel ingest (retrieval/sharded.py): 2 CPU processes (gloo) build the same index as 1 process, a
SIGKILLed worker or merge loses nothing and doubles nothing after a rerun, and unfinished or foreign shards stop
the merge with the reason."""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from retrieval import sharded
from retrieval.errors import IndexOpenError, RetrievalError
from retrieval.ingest import Indexer, IngestConfig
from retrieval.retriever import Retriever
from retrieval.store import DB_NAME, Store

REPO = Path(__file__).resolve().parents[2]
QUERIES = ["aurora annual report revenue", "topic 3 in the warehouse"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Text files, one duplicate (its twin lands on the other rank), a PDF, a page image of that PDF (left out)
    and two page images without their PDF (indexed as its pages): the cases that span shards."""
    root = tmp_path_factory.mktemp("sharded_corpus")
    for i in range(20):
        (root / f"doc_{i:02d}.txt").write_text(
            f"Document {i} is about topic {i % 7} and item {i} in the warehouse. "
            f"It mentions shelf {i * 3} and the colour {['red', 'blue'][i % 2]}."
        )
    shutil.copy(root / "doc_03.txt", root / "doc_03_copy.txt")  # walk order: doc_03, doc_03_copy (other rank)
    shutil.copy(REPO / "assets" / "corpus" / "aurora_annual_report_2025.pdf", root / "aurora_annual_report_2025.pdf")
    Image.new("RGB", (120, 160), "white").save(root / "aurora_annual_report_2025_1.jpg")
    for n, colour in ((1, "navy"), (2, "olive")):
        Image.new("RGB", (160, 120), colour).save(root / f"slides_{n}.jpg")
    return root


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> Path:
    idx = tmp_path_factory.mktemp("one_process")
    Indexer(idx, IngestConfig(ocr="none", batch_units=4)).index([corpus], progress=False)
    return idx


def _cmd(corpus: Path, idx: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "app.cli",
        "index",
        str(corpus),
        "--index",
        str(idx),
        "--ocr",
        "none",
        "--batch-size",
        "2",
        "--num-processes",
        "2",
        "-q",
        "--json",
        *extra,
    ]


def _snapshot(idx: Path) -> tuple[dict, set, str | None]:
    """uid -> (unit fields, vectors), the file records, and the embedder meta of an index."""
    store = Store(idx)
    rows, units = store.units()
    uid_of = {int(r): u.uid for r, u in zip(rows, units)}
    vecs: dict[str, list] = {}
    for _, owners, arrs in store.iter_vectors():
        for o, v in zip(owners, arrs):
            vecs.setdefault(uid_of[int(o)], []).append(v)
    out = {u.uid: ((u.text, u.source, u.modality, u.page, u.doc), np.stack(vecs[u.uid])) for u in units}
    files = {(f.path, f.sha256, f.status, f.n_units) for f in store.files()}
    assert store.duplicate_uids() == 0
    spec = store.get_meta("embedder")
    store.close()
    return out, files, spec


def assert_same_index(idx: Path, reference: Path) -> None:
    got, got_files, got_spec = _snapshot(idx)
    want, want_files, want_spec = _snapshot(reference)
    assert got_spec == want_spec
    assert got_files == want_files
    assert got.keys() == want.keys()
    for uid, (fields, vecs) in want.items():
        assert got[uid][0] == fields, uid
        assert got[uid][1].shape == vecs.shape, uid
        assert float(np.abs(got[uid][1] - vecs).max()) < 1e-4, uid
    for q in QUERIES:
        assert [h.unit.uid for h in Retriever(idx).search(q, k=5)] == [
            h.unit.uid for h in Retriever(reference).search(q, k=5)
        ], q
    assert not (idx / sharded.SHARDS).exists()


@pytest.mark.slow
def test_two_processes_build_the_one_process_index(corpus, reference, tmp_path):
    idx = tmp_path / "idx"
    run = subprocess.run(_cmd(corpus, idx), check=False, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout[run.stdout.index("{") :])
    assert_same_index(idx, reference)
    assert summary["files_indexed"] == 23 and summary["total_units"] == Store(reference).count_units()
    # the shards' precision reaches the merged index, as one process records it (the suite runs fp32)
    assert Store(idx).get_meta("precision") == Store(reference).get_meta("precision") == "fp32"
    assert [p for p, why in summary["skipped"] if "duplicate of" in why] == [str(corpus / "doc_03_copy.txt")]
    assert summary["page_images"] == 2


def _units(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as c:
            return c.execute("SELECT COUNT(*) FROM units").fetchone()[0]
    except sqlite3.Error:
        return 0


def _worker(launcher: subprocess.Popen, rank: int):
    import psutil

    for p in psutil.Process(launcher.pid).children(recursive=True):
        try:
            if p.environ().get("RANK") == str(rank) and "app.cli" in p.cmdline():
                return p
        except psutil.Error:
            continue
    return None


def _kill_when(launcher: subprocess.Popen, rank: int, ready, what: str) -> None:
    deadline = time.time() + 180
    while not ready() and time.time() < deadline and launcher.poll() is None:
        time.sleep(0.05)
    worker = _worker(launcher, rank)
    assert worker is not None and launcher.poll() is None, f"the run ended before {what}"
    worker.send_signal(signal.SIGKILL)
    assert launcher.wait(timeout=120) != 0


@pytest.mark.slow
def test_sigkill_a_worker_then_the_merge_then_rerun(corpus, reference, tmp_path):
    idx = tmp_path / "idx"
    env = {**os.environ, sharded.DELAY_ENV: "0.3"}  # each process sleeps after every committed batch
    shard1 = sharded.shard_dir(idx, 1) / DB_NAME
    try:
        # 1. Rank 1 dies mid-shard: nothing is merged, its committed batches stay in its shard.
        with open(tmp_path / "stderr", "wb") as err:
            launcher = subprocess.Popen(
                _cmd(corpus, idx), env=env, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=err
            )
            _kill_when(launcher, 1, lambda: _units(shard1) >= 2, "rank 1 committed a batch")
        kept = _units(shard1)
        assert kept >= 2 and _units(idx / DB_NAME) == 0
        assert "rerun the same command to finish" in (tmp_path / "stderr").read_text()
        # 2. The rerun's rank 0 dies mid-merge: the index holds whole files only, the shards stay.
        launcher = subprocess.Popen(
            _cmd(corpus, idx),
            env=env,
            cwd=REPO,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _kill_when(launcher, 0, lambda: _units(idx / DB_NAME) > 0, "the merge began")
        assert (idx / sharded.SHARDS).is_dir(), "the kill did not land mid-merge"
        merged = Store(idx)
        assert merged.duplicate_uids() == 0 and all(
            f.n_units == len(merged.pending(f.path).units) for f in merged.files()
        )
        merged.close()
        assert _units(shard1) >= kept  # nothing rank 1 committed was lost
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    # 3. A plain rerun completes the index: nothing lost, nothing doubled.
    run = subprocess.run(_cmd(corpus, idx), check=False, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    assert_same_index(idx, reference)


@pytest.mark.slow
def test_merge_refuses_unfinished_or_failed_shards(corpus, reference, tmp_path):
    idx = tmp_path / "idx"
    cfg = IngestConfig(ocr="none", batch_units=4)
    plan, planned = sharded.plan(idx, [corpus], cfg, world=2)
    sharded.run_shard(idx, plan, 0, cfg)
    with pytest.raises(RetrievalError, match=r"ranks \[1\].*not finished"):
        sharded.merge(idx, plan, cfg, planned)
    (sharded.shard_dir(idx, 1)).mkdir(parents=True)
    (sharded.shard_dir(idx, 1) / sharded.DONE).write_text(
        json.dumps({"run": plan.run, "rank": 1, "ok": False, "error": "CUDA out of memory"})
    )
    with pytest.raises(RetrievalError, match="rank 1 .*failed .*CUDA out of memory.*nothing was merged"):
        sharded.merge(idx, plan, cfg, planned)
    assert _units(idx / DB_NAME) == 0
    # A stale done.json of an earlier run does not count either.
    (sharded.shard_dir(idx, 1) / sharded.DONE).write_text(
        json.dumps({"run": "earlier", "rank": 1, "ok": True, "summary": {}})
    )
    with pytest.raises(RetrievalError, match="not finished"):
        sharded.merge(idx, plan, cfg, planned)
    sharded.run_shard(idx, plan, 1, cfg)
    summary = sharded.merge(idx, plan, cfg, planned)
    assert summary.files_indexed == 23 and summary.total_units == Store(reference).count_units()
    assert_same_index(idx, reference)
    # The next run finds everything in the index. Only the duplicate is planned again (it is not in the index);
    # its shard finds its twin in the index and skips it without embedding it, as a 1-process run does.
    plan, planned = sharded.plan(idx, [corpus], cfg, world=2)
    assert [f for f, _, _ in plan.files] == [str(corpus / "doc_03_copy.txt")] and planned.unchanged == 23
    assert sum(sharded.run_shard(idx, plan, r, cfg).files_indexed for r in (0, 1)) == 0
    again = sharded.merge(idx, plan, cfg, planned)
    assert again.files_indexed == 0 and [p for p, why in again.skipped if "duplicate" in why] == [plan.files[0][0]]
    assert_same_index(idx, reference)


def test_leftover_shard_of_another_embedder_is_named(corpus, tmp_path):
    idx = tmp_path / "idx"
    stale = Store(sharded.shard_dir(idx, 1), create=True)
    stale.set_meta("embedder", "clip:openai/clip-vit-base-patch32")
    stale.close()
    with pytest.raises(IndexOpenError, match=r"\.shards holds an unfinished .*clip:openai.*--embedder clip:openai"):
        sharded.plan(idx, [corpus], IngestConfig(ocr="none"), world=2)


def test_world_size_reads_the_launcher_env(monkeypatch):
    for name in ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert sharded.world_size() == 1
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert sharded.world_size() == 4


def test_leave_worker_runs_exit_handlers_flushes_and_keeps_the_code(tmp_path):
    """A worker rank leaves through `leave_worker`: its atexit work and unflushed output survive the skipped
    teardown, and the exit code is the one asked for."""
    script = (
        "import atexit, sys\n"
        "from retrieval import sharded\n"
        f"atexit.register(lambda: open({str(tmp_path / 'ran')!r}, 'w').write('yes'))\n"
        "sys.stdout.write('no newline yet')\n"
        "sharded.leave_worker(3)\n"
        "print('not reached')\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert run.returncode == 3, run.stderr
    assert run.stdout == "no newline yet"
    assert (tmp_path / "ran").read_text() == "yes"
