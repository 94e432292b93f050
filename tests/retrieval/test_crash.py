"""Crash safety: SIGKILL an ingest mid-way, rerun it, and the index is complete with no duplicates."""

import json
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from retrieval.retriever import Retriever
from retrieval.store import DB_NAME, Store

N_FILES = 400


def _units(idx) -> int:
    try:
        with sqlite3.connect(f"file:{idx / DB_NAME}?mode=ro", uri=True, timeout=1) as c:
            return c.execute("SELECT COUNT(*) FROM units").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_kill_9_mid_ingest_then_resume(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(N_FILES):
        (corpus / f"doc_{i:04d}.txt").write_text(f"Document number {i} talks about topic {i % 37} and item {i}.")
    idx = tmp_path / "idx"
    cmd = [
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
        "4",
        "-q",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while _units(idx) < 12 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    at_kill = _units(idx)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    assert 0 < at_kill < N_FILES, f"the kill did not land mid-ingest ({at_kill} units)"

    rerun = subprocess.run(cmd + ["--json"], capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    store = Store(idx)
    assert store.count_units() == N_FILES
    assert store.duplicate_uids() == 0
    assert len({u.source for u in store.units()[1]}) == N_FILES
    # Every file committed before the kill was kept, not redone; the rest were indexed once.
    summary = json.loads(rerun.stdout)
    assert summary["unchanged"] == at_kill
    assert summary["files_indexed"] == N_FILES - at_kill
    hits = Retriever(idx).search("Document number 277", k=1, mode="bm25")
    assert hits[0].unit.name == "doc_0277.txt"
