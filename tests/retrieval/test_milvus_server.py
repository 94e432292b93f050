"""Data-parallel ingest into one collection of a Milvus Lite server on 127.0.0.1 (retrieval/sharded.py with a
shared store): 2 processes leave every unit once, the same units as a 1-process local run, and a worker killed
with SIGKILL mid-ingest, then a rerun, leaves the same units as a clean run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from retrieval import sharded
from retrieval.retriever import Retriever
from retrieval.server import free_port
from retrieval.stores import open_store
from tests.retrieval.test_sharded_ingest import QUERIES, _kill_when, corpus, reference  # noqa: F401 - fixtures

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("pymilvus", reason="the Milvus store needs pymilvus: pip install 'vimrag[milvus]'")
pytest.importorskip("milvus_lite", reason="the Milvus Lite server needs milvus-lite: pip install 'vimrag[milvus]'")


def _start_server(data: Path) -> tuple[subprocess.Popen, str]:
    """`milvus-lite server` on 127.0.0.1 and a free port, once it answers: (process, HOST:PORT)."""
    from pymilvus import MilvusClient

    port = free_port()
    exe = Path(sys.executable).with_name("milvus-lite")
    proc = subprocess.Popen(
        [str(exe), "server", "--data-dir", str(data), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 60
    while True:
        assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
        try:
            MilvusClient(uri=f"http://127.0.0.1:{port}", timeout=2).list_collections()
            return proc, f"127.0.0.1:{port}"
        except Exception:  # noqa: BLE001 - not up yet
            if time.time() > deadline:
                proc.kill()
                raise AssertionError("milvus-lite server did not start") from None
            time.sleep(0.3)


@pytest.fixture(scope="module")
def milvus(tmp_path_factory):
    """A Milvus Lite server for the module; yields its address."""
    proc, address = _start_server(tmp_path_factory.mktemp("milvus_data"))
    try:
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _cmd(root: Path, idx: Path, store: str) -> list[str]:
    return [
        *(sys.executable, "-m", "app.cli", "index", str(root), "--index", str(idx), "--store", store),
        *("--ocr", "none", "--batch-size", "2", "--num-processes", "2", "-q", "--json"),
    ]


def _snapshot(idx: Path) -> tuple[dict, set]:
    """uid -> (unit fields, vectors), and the file records, of an index on either store."""
    store = open_store(idx)
    try:
        _, units = store.units()
        out = {u.uid: (u.text, u.source, u.modality, u.page, u.doc) for u in units}
        files = {(f.path, f.sha256, f.status, f.n_units) for f in store.files()}
        if store.kind == "local":
            vecs = {u.uid: len(v) for u, v in zip(units, _vectors_local(store, units))}
        else:
            rows = store._query("vectors", "", ["uid"])
            vecs = {}
            for r in rows:
                vecs[r["uid"]] = vecs.get(r["uid"], 0) + 1
            assert len(units) == store.count_units()  # no unit twice
    finally:
        store.close()
    return {uid: (f, vecs.get(uid, 0)) for uid, f in out.items()}, files


def _vectors_local(store, units) -> list[list]:
    rows, _ = store.units()
    pos = {int(r): i for i, r in enumerate(rows)}
    per: list[list] = [[] for _ in units]
    for _, owners, arrs in store.iter_vectors():
        for o, a in zip(owners, arrs):
            per[pos[int(o)]].append(a)
    return per


def _assert_like_reference(idx: Path, reference: Path) -> None:  # noqa: F811 - the fixture's value
    got, got_files = _snapshot(idx)
    want, want_files = _snapshot(reference)
    assert got == want
    assert got_files == want_files
    for q in QUERIES:
        assert [h.unit.uid for h in Retriever(idx).search(q, k=3, mode="dense")] == [
            h.unit.uid for h in Retriever(reference).search(q, k=3, mode="dense")
        ], q
    assert not (idx / sharded.SHARDS).exists()


@pytest.mark.slow
def test_two_processes_write_one_collection(corpus, reference, milvus, tmp_path):  # noqa: F811
    idx = tmp_path / "idx"
    run = subprocess.run(
        _cmd(corpus, idx, f"milvus://{milvus}/two_procs"), capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout[run.stdout.index("{") :])
    assert summary["files_indexed"] == 23 and summary["page_images"] == 2
    assert [p for p, why in summary["skipped"] if "duplicate of" in why] == [str(corpus / "doc_03_copy.txt")]
    _assert_like_reference(idx, reference)
    # Two search-server workers on the Milvus index: each opens its own client after the fork.
    port = free_port()
    cmd = [sys.executable, "-m", "app.cli", "serve-search", "--index", str(idx), "--port", str(port), "--workers", "2"]
    server = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        want = [h.unit.uid for h in Retriever(reference).search(QUERIES[0], k=3, mode="dense")]
        body = {"queries": [QUERIES[0]], "top_k": 3, "mode": "dense"}
        deadline, pids = time.time() + 180, set()
        while len(pids) < 2:
            assert server.poll() is None, server.stdout.read().decode()[-3000:]
            assert time.time() < deadline, f"workers that answered: {pids}"
            try:
                r = httpx.post(f"http://127.0.0.1:{port}/search", json=body, timeout=30)
                assert [d["uid"] for d in r.json()["results"][0]["data"]] == want
                pids.add(httpx.get(f"http://127.0.0.1:{port}/health", timeout=30).json()["pid"])
            except httpx.HTTPError:
                time.sleep(0.3)
    finally:
        server.terminate()
        server.wait(timeout=30)


def _count(milvus: str, collection: str) -> int:
    from pymilvus import MilvusClient

    try:
        c = MilvusClient(uri=f"http://{milvus}", timeout=5)
        if f"{collection}_files" not in c.list_collections():
            return 0
        c.load_collection(f"{collection}_files")
        return int(c.query(f"{collection}_files", filter="", output_fields=["count(*)"])[0]["count(*)"])
    except Exception:  # noqa: BLE001 - mid-creation: nothing counted yet
        return 0


@pytest.mark.slow
def test_sigkill_a_worker_then_rerun(corpus, reference, milvus, tmp_path):  # noqa: F811
    idx = tmp_path / "idx"
    store = f"milvus://{milvus}/killed"
    env = {**os.environ, sharded.DELAY_ENV: "0.4"}  # each process sleeps after every committed batch
    with open(tmp_path / "stderr", "wb") as err:
        launcher = subprocess.Popen(
            _cmd(corpus, idx, store), env=env, cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL, stderr=err
        )
        try:
            _kill_when(launcher, 1, lambda: _count(milvus, "killed") >= 3, "a rank committed batches")
        finally:
            if launcher.poll() is None:
                os.killpg(launcher.pid, signal.SIGKILL)
    kept = _count(milvus, "killed")
    assert 3 <= kept < 23, "the kill did not land mid-ingest"
    assert "in the shared collection" in (tmp_path / "stderr").read_text()
    run = subprocess.run(_cmd(corpus, idx, store), capture_output=True, text=True, timeout=300, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout[run.stdout.index("{") :])
    assert summary["unchanged"] >= kept - 1  # what was committed before the kill is not embedded again
    _assert_like_reference(idx, reference)
    assert np.isfinite(Retriever(idx).search("aurora", k=1)[0].score)


@pytest.mark.slow
def test_a_server_gone_mid_session_fails_the_search_with_the_fix(tmp_path):
    from retrieval.errors import RetrievalError
    from retrieval.ingest import Indexer, IngestConfig

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.txt").write_text("The cobalt crate holds 21 bolts.")
    proc, address = _start_server(tmp_path / "data")
    try:
        Indexer(tmp_path / "idx", IngestConfig(ocr="none", store=f"milvus://{address}/gone")).index(
            [tmp_path / "c"], progress=False
        )
        r = Retriever(tmp_path / "idx")
        assert r.search("cobalt crate", k=1)[0].unit.text.startswith("The cobalt crate")
    finally:
        proc.kill()
        proc.wait(timeout=30)
    # A RetrievalError, which the agent's search tool reports to the model, not an exception that ends a session.
    with pytest.raises(RetrievalError, match=f"cannot reach Milvus at http://{address}.*milvus-lite server"):
        r.search("cobalt crate", k=1)
