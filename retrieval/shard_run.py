"""Step 2 of a data-parallel ingest (retrieval/sharded.py), on every rank: index the rank's share of the plan into
its own shard store and write its done.json, or straight into the shared Milvus collection the plan names.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from retrieval.ingest import Indexer, IngestConfig, IngestSummary
from retrieval.shard_plan import DONE, ShardPlan, shard_dir
from retrieval.store import Store
from retrieval.stores import open_store


class _ShardStore(Store):
    """A shard's store that also finds same-content files in the main index (read only while shards run), so a
    shard skips a file the index holds under another path, as a 1-process run does, instead of embedding it."""

    def __init__(self, shard: Path, main: Store) -> None:
        super().__init__(shard, create=True)
        self.main = main

    def path_with_hash(self, sha256: str) -> str | None:
        return super().path_with_hash(sha256) or self.main.path_with_hash(sha256)


def run_shard(
    index_dir: str | Path,
    plan: ShardPlan,
    rank: int,
    config: IngestConfig,
    device: str | None = None,
    progress: bool = False,
) -> IngestSummary:
    """Index rank `rank`'s files into its shard store, then write its done.json (or the error that stopped it)."""
    d = shard_dir(index_dir, rank)
    try:
        mine = plan.shard(rank)
        main = Store(index_dir)  # rank 0 created it while planning
        try:
            store = _ShardStore(d, main)
            try:
                # Files of earlier plans that are not this rank's now (merged since, or moved to another rank)
                # go, so they can never pass for an earlier copy of a file with the same content.
                keep = {f for f, _ in mine}
                store.remove_files([r.path for r in store.files() if r.path not in keep])
                ix = Indexer(d, replace(config, embedder=plan.embedder, store=None), store=store, device=device)
                summary = ix.index([], progress=progress, planned=_planned(plan, rank))
            finally:
                store.close()
        finally:
            main.close()
    except BaseException as e:
        if not isinstance(e, KeyboardInterrupt):
            try:
                d.mkdir(parents=True, exist_ok=True)
                _write_json(d / DONE, {"run": plan.run, "rank": rank, "ok": False, "error": f"{type(e).__name__}: {e}"})
            except OSError:
                pass  # the shard folder itself is the problem: rank 0 waits until the launcher ends it
        raise
    _write_json(d / DONE, {"run": plan.run, "rank": rank, "ok": True, "summary": summary.to_dict()})
    return summary


def run_share(
    index_dir: str | Path, plan: ShardPlan, rank: int, config: IngestConfig, device: str | None, progress: bool
) -> dict:
    """Index rank `rank`'s files straight into the shared collection the plan names: {"ok", "summary" | "error"}.

    Nothing of this run goes through the index folder, so ranks on other machines need no shared filesystem:
    rank 0 gathers these results through the process group."""
    try:
        store = open_store(index_dir, create=True, store=plan.store)
        try:
            ix = Indexer(index_dir, replace(config, embedder=plan.embedder, store=None), store=store, device=device)
            return {"ok": True, "summary": ix.index([], progress=progress, planned=_planned(plan, rank)).to_dict()}
        finally:
            store.close()
    except Exception as e:  # noqa: BLE001 - every rank must reach the gather, or rank 0 waits for it forever
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def _planned(plan: ShardPlan, rank: int) -> tuple[list[tuple[Path, Path]], dict[Path, tuple[str, int]]]:
    return [(Path(f), Path(r)) for f, r in plan.shard(rank)], {Path(p): v for p, v in plan.page_of.items()}


def _write_json(path: Path, obj: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)  # atomic: a reader sees the old file or the whole new one
