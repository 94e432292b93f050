"""eval.bench_search_threads runs end to end on a tiny index, and its baseline really is the old rule."""

from __future__ import annotations

import retrieval.index as index_module
from eval import bench_search_threads as bench
from retrieval.index_base import configured_threads


def test_the_baseline_searches_one_query_on_every_configured_thread_and_puts_the_rule_back():
    rule = index_module.search_threads
    with bench.old_rule():
        assert index_module.search_threads(1) == configured_threads()
    assert index_module.search_threads is rule and rule(1) == 1


def test_it_prints_one_row_per_index_and_load_and_per_batch(capsys, monkeypatch):
    monkeypatch.setenv("VIMRAG_FAISS_THREADS", "2")  # the batch table needs more than one configured thread
    assert bench.main(["--sizes", "300,600", "--busy", "0", "--reps", "3", "--rounds", "1", "--batches", "2,4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    single = [line for line in lines if "one query" in line]
    assert [r.split(" | ")[0] for r in single] == ["| flat 300, one query", "| flat 600, one query"]
    batches = [line.split(" | ")[:2] for line in lines if line.startswith("| flat") and "one query" not in line]
    assert batches == [["| flat 300", "2"], ["| flat 300", "4"], ["| flat 600", "2"], ["| flat 600", "4"]]
    assert all(r.endswith("x |") for r in lines if r.startswith("| flat"))
