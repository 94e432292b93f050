"""`serve-search --workers 2`: two preloaded gunicorn workers serve one local index on 127.0.0.1, both answer,
and an embedded Milvus Lite index is refused with the fix (one process only)."""

import concurrent.futures as cf
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from retrieval.errors import RetrievalError
from retrieval.ingest import Indexer, IngestConfig
from retrieval.server import free_port, serve

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("workers_corpus")
    for i in range(8):
        (root / f"note_{i}.txt").write_text(f"Note {i}: the {['amber', 'cobalt'][i % 2]} crate holds {i * 7} bolts.")
    idx = tmp_path_factory.mktemp("workers_idx")
    Indexer(idx, IngestConfig(ocr="none")).index([root], progress=False)
    return idx


@pytest.mark.slow
def test_two_workers_share_the_socket_and_both_answer(index):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "app.cli", "serve-search", "--index", str(index), "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--workers", "2"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 180
        while True:
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.time() < deadline, "the server did not come up"
            time.sleep(0.5)
        master = psutil.Process(proc.pid)
        while len(master.children()) < 2 and time.time() < deadline:  # workers start one after the other
            time.sleep(0.2)
        tree = [master, *master.children(recursive=True)]
        assert len(tree) == 3  # gunicorn's master and two workers
        listening = {c.laddr.ip for p in tree for c in p.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
        assert listening == {"127.0.0.1"}

        def ask(i: int) -> tuple[int, str]:
            with httpx.Client(timeout=60) as c:
                r = c.post(url + "/search", json={"queries": [f"crate with {i * 7} bolts"], "top_k": 1})
                r.raise_for_status()
                return c.get(url + "/health").json()["pid"], r.json()["results"][0]["data"][0]["content"]

        with cf.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, range(8)))
        assert [text for _, text in answers] == [
            f"Note {i}: the {['amber', 'cobalt'][i % 2]} crate holds {i * 7} bolts." for i in range(8)
        ]
        pids = {pid for pid, _ in answers}
        for _ in range(100):  # requests go to whichever worker accepts first; ask until both have answered
            if len(pids) == 2:
                break
            with cf.ThreadPoolExecutor(8) as pool:
                pids |= {pid for pid, _ in pool.map(ask, range(8))}
        assert pids == {p.pid for p in tree[1:]}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_workers_refuse_an_embedded_milvus_lite_index(tmp_path, index):
    pytest.importorskip("milvus_lite", reason="needs milvus-lite: pip install 'vimrag[milvus]'")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.txt").write_text("A note about the cobalt crate.")
    idx = tmp_path / "m"
    Indexer(idx, IngestConfig(ocr="none", store="milvus-lite")).index([tmp_path / "c"], progress=False)
    with pytest.raises(RetrievalError, match="cannot share the embedded Milvus Lite file.*milvus-lite server"):
        serve(idx, port=free_port(), workers=2)
    with pytest.raises(ValueError, match="workers=0"):
        serve(idx, workers=0)
