"""Data-parallel ingest: N processes (one per GPU, or CPU processes) each embed a share of the files. On the local
store each writes a shard that rank 0 merges into one index; on a Milvus server each writes straight into the one
shared collection, and there is nothing to merge.

    accelerate launch --multi_gpu --num_processes 8 -m app.cli index corpus/ --index idx --embedder colqwen2:...
    vimrag index corpus/ --index idx --num-processes 2     # spawns the processes itself (accelerate launch)

How a run goes:
  1. rank 0 plans, as a 1-process run would: it walks PATH..., applies the page-image convention against the
     main index, and leaves out files the main index already holds unchanged. The file at walk position i
     goes to rank i % N, so a rerun of the same corpus gives every file the rank it had. The plan (files and
     ranks, page numbers of page images, embedder spec, a run id) is broadcast to every rank.
  2. rank r runs an ordinary `Indexer` on its files into its own shard store DIR/.shards/rank-r, on its own
     device (`accelerate.PartialState().device`), then writes DIR/.shards/rank-r/done.json with the run id
     and its summary (or the error that stopped it).
  3. rank 0 waits for every rank's done.json of this run, then copies the shards into DIR's store file by
     file, in walk order, with `Store.commit` (one SQLite transaction per batch), resolving same-content
     files across shards as a 1-process run does; then it deletes DIR/.shards.
Step 1 is retrieval/shard_plan.py and step 2 retrieval/shard_run.py; step 3 and the launch are here.

Crash safety comes from the stores: a shard commits in batches, so a killed worker keeps what it committed
and a rerun (same plan, same shard) skips it; the merge only starts when every shard of this run has
finished, a killed merge leaves DIR with whole files only, and a rerun leaves merged files out of the plan.
Derived FAISS / BM25 files key on the store's version and rebuild on the next search, as after any ingest.

On a Milvus server (`--store milvus://HOST:PORT/C`, retrieval/milvus_store.py) step 2 writes into the shared
collection with upserts keyed by content hash, and step 3 only gathers the summaries, through the process group
(`gather_object`), so ranks on other machines need no filesystem in common: a killed rank loses at most
its uncommitted batch, and a rerun rewrites what it had half written, never doubling a unit. Rank 0's plan also
leaves out same-content copies across ranks, which a merge would otherwise resolve.

Left out on purpose: work stealing between ranks (rank i % N balances well enough when files are many),
and multi-node runs without a filesystem that every node sees at DIR.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from retrieval.errors import IndexOpenError, RetrievalError
from retrieval.ingest import DELAY_ENV, Indexer, IngestConfig, IngestSummary
from retrieval.ingest_plan import same_content
from retrieval.precision import merge_precisions
from retrieval.shard_plan import DONE, SHARDS, ShardPlan, plan, shard_dir
from retrieval.shard_run import run_shard, run_share
from retrieval.store import PendingFile, Store

_WORLD_ENV = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")  # as accelerate reads them


def world_size() -> int:
    """Processes in the distributed launch this process belongs to (1 outside `accelerate launch` / torchrun)."""
    for name in _WORLD_ENV:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 1


# ---------------------------------------------------------------------------------------------- merge (rank 0)
def wait_for_shards(
    index_dir: str | Path, plan: ShardPlan, timeout: float | None = None, poll: float = 0.2
) -> list[dict]:
    """Every rank's done.json of this run (its summary), once all are there. A rank that failed stops the merge.

    No timeout by default: a rank that dies is noticed by the launcher (torchrun ends the others).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        done, missing = [], []
        for r in range(plan.world):
            m = _read_json(shard_dir(index_dir, r) / DONE)
            if m is None or m.get("run") != plan.run:
                missing.append(r)
            elif not m["ok"]:
                raise RetrievalError(
                    f"rank {r} of the data-parallel ingest into {index_dir} failed ({m['error']}); {_kept(index_dir)}: "
                    "fix the cause and rerun the same command to finish"
                )
            else:
                done.append(m["summary"])
        if not missing:
            return done
        if deadline is not None and time.monotonic() > deadline:
            raise RetrievalError(
                f"ranks {missing} of the data-parallel ingest into {index_dir} have not finished "
                "their shards; nothing was merged. Rerun the same command to finish"
            )
        time.sleep(poll)


def merge(
    index_dir: str | Path,
    plan: ShardPlan,
    config: IngestConfig,
    planned: IngestSummary,
    prune: list[str | Path] | None = None,
) -> IngestSummary:
    """Copy every finished shard into the index, file by file in walk order, then delete the shards.

    Refuses to run unless every rank has finished this run (`wait_for_shards`), so a partial shard is never
    merged. A file already merged is replaced, never doubled (Store.commit replaces a file's units).
    """
    index_dir = Path(index_dir)
    shard_summaries = wait_for_shards(index_dir, plan, timeout=0)
    summary = planned
    main = Indexer(index_dir, replace(config, embedder=plan.embedder))
    shards = [Store(shard_dir(index_dir, r)) for r in range(plan.world)]
    delay = float(os.environ.get(DELAY_ENV, "0") or 0)
    try:
        for r, s in enumerate(shards):
            built = s.get_meta("embedder")
            if built and built != plan.embedder:
                raise IndexOpenError(
                    f"{shard_dir(index_dir, r)} holds embedder {built!r}, not {plan.embedder!r}; "
                    f"delete {index_dir / SHARDS} and index again"
                )
        reported: list[set[str]] = []
        for r, s in enumerate(shard_summaries):  # what each shard said about files it did not store
            reported.append({p for p, _ in s["skipped"]} | {p for p, _ in s["failed"]})
            summary.skipped += [tuple(x) for x in s["skipped"]]
            summary.failed += [tuple(x) for x in s["failed"] if shards[r].file(x[0]) is None]
        seen: dict[str, str] = {}
        batch: list[PendingFile] = []
        n_units = 0
        for path, _, r in plan.files:
            pf = shards[r].pending(path)
            if pf is None:
                if path not in reported[r]:
                    summary.failed.append((path, f"rank {r} did not index it; rerun to index it"))
                continue
            # Same content under two paths, decided as a 1-process run does, across shards and the index.
            skip, pf.replaces = same_content(path, pf.record.sha256, pf.record.size, seen, main.store, summary)
            if skip:
                continue
            if pf.record.status != "ok":
                summary.failed.append((path, pf.record.reason))
            batch.append(pf)
            n_units += len(pf.units)
            if n_units >= config.batch_units or len(batch) >= 256:
                _commit(main.store, shards, batch, summary, delay)
                batch, n_units = [], 0
        _commit(main.store, shards, batch, summary, delay)
        if prune:
            summary.pruned = main.prune(prune)
        summary.total_units = main.store.count_units()
    finally:
        for s in shards:
            s.close()
        main.store.close()
    # Rename first: a kill while deleting leaves .shards.done (removed by the next plan), never half a shard.
    done = index_dir / (SHARDS + ".done")
    shutil.rmtree(done, ignore_errors=True)
    os.replace(index_dir / SHARDS, done)
    shutil.rmtree(done, ignore_errors=True)
    return summary


def _kept(index_dir: str | Path) -> str:
    """What a failed run leaves, for its error message."""
    if _shared_store(index_dir):
        return "every batch a rank committed is in the shared collection, and the rerun skips those files"
    return f"nothing was merged; each shard keeps what it committed under {Path(index_dir) / SHARDS}"


def _shared_store(index_dir: str | Path) -> bool:
    """Whether the index lives in a store every rank writes to (Milvus), so there are no shards to merge."""
    from retrieval.store_spec import recorded_spec

    spec = recorded_spec(index_dir)
    return spec is not None and spec.kind != "local"


def _gather(
    index_dir: str | Path,
    config: IngestConfig,
    planned: IngestSummary,
    done: list[dict],
    prune: list[str | Path] | None = None,
) -> IngestSummary:
    """Rank 0's summary of a run whose ranks wrote straight into the shared collection: the plan's findings plus
    every rank's, then --prune."""
    summary = planned
    for s in done:
        for key in ("files_indexed", "units_indexed", "page_images"):
            setattr(summary, key, getattr(summary, key) + s[key])
        summary.skipped += [tuple(x) for x in s["skipped"]]
        summary.failed += [tuple(x) for x in s["failed"]]
        for stage, sec in s["timings"].items():
            summary.timings[stage] = summary.timings.get(stage, 0.0) + sec
    ix = Indexer(index_dir, replace(config, store=None))
    try:
        if prune:
            summary.pruned = ix.prune(prune)
        summary.total_units = ix.store.count_units()
    finally:
        ix.store.close()
    return summary


def _commit(main: Store, shards: list[Store], batch: list[PendingFile], summary: IngestSummary, delay: float) -> None:
    if not batch:
        return
    if any(pf.units for pf in batch):  # the index meta a 1-process run sets with its first units
        before = main.get_meta("precision") or ("fp32" if main.get_meta("embedder") else "")
        for s in shards:
            for key, value in s.conn.execute("SELECT key, value FROM meta WHERE key NOT IN ('schema', 'version')"):
                if key == "precision":
                    before = merge_precisions(before, value)
                elif main.get_meta(key) is None:
                    main.set_meta(key, value)
        if before and main.get_meta("precision") != before:
            main.set_meta("precision", before)
    main.commit(batch)
    for pf in batch:
        if pf.record.status == "ok":
            summary.files_indexed += 1
            summary.units_indexed += len(pf.units)
            summary.page_images += sum(1 for u in pf.units if u.doc)
    if delay:
        time.sleep(delay)


# ---------------------------------------------------------------------------------------------- launch
def index_distributed(
    paths: list[str | Path], index_dir: str | Path, config: IngestConfig, prune: bool = False, progress: bool = True
) -> IngestSummary | None:
    """Run this process's part of a data-parallel ingest (under accelerate launch / torchrun).

    Returns the merged summary on rank 0 and None on the other ranks.
    """
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list

    t0 = time.perf_counter()
    # Without CUDA, accelerate only forms a process group when told to use the CPU (gloo).
    cpu = os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true") or not torch.cuda.is_available()
    state = PartialState(cpu=cpu, timeout=timedelta(hours=6))  # rank 0 plans while the others wait
    rank, world = state.process_index, state.num_processes
    try:
        box, planned, err = [None], None, None
        if rank == 0:
            try:
                p, planned = plan(index_dir, paths, config, world)
                box = [p.to_dict()]
            except Exception as e:  # noqa: BLE001 - every rank must get an answer, or the others wait forever
                err = e
                box = [ShardPlan("", world, "", error=f"rank 0 could not plan the ingest: {e}").to_dict()]
        if world > 1:
            broadcast_object_list(box, from_process=0)
        if err is not None:
            raise err
        p = ShardPlan.from_dict(box[0])
        if p.error:
            raise RetrievalError(p.error)
        if p.store:  # one shared collection: no shards, no merge
            from accelerate.utils import gather_object

            mine = run_share(index_dir, p, rank, config, device=str(state.device), progress=progress and rank == 0)
            results = gather_object([mine]) if world > 1 else [mine]
            if rank != 0:
                return None
            for r, res in enumerate(results):
                if not res["ok"]:
                    raise RetrievalError(
                        f"rank {r} of the data-parallel ingest into {p.store} failed ({res['error']}); "
                        f"{_kept(index_dir)}: fix the cause and rerun the same command to finish"
                    )
            done = [res["summary"] for res in results]
            summary = _gather(index_dir, config, planned, done, prune=list(paths) if prune else None)
        else:
            run_shard(index_dir, p, rank, config, device=str(state.device), progress=progress and rank == 0)
            if rank != 0:
                return None
            wait_for_shards(index_dir, p)
            if progress:
                print(f"merging {world} shards into {index_dir}", file=sys.stderr, flush=True)
            summary = merge(index_dir, p, config, planned, prune=list(paths) if prune else None)
        summary.seconds = time.perf_counter() - t0
        return summary
    finally:
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


def leave_worker(code: int = 0) -> None:
    """End a worker rank (not rank 0) whose part is delivered and whose process group is gone: run the Python
    exit handlers, flush, and leave without the interpreter's native teardown.

    In about one of a hundred 2-process ingests into a Milvus server (1 of 115 runs in a loop here, and 1 of 8
    clean CI-style runs), rank 1 died of SIGABRT with C++'s "terminate called without an active exception" and no
    Python traceback, and the launcher then killed rank 0 before it printed the summary. That message means a
    joinable native thread was destroyed, which is typical of library teardown at exit; rank 1 holds threads of
    gloo, gRPC (pymilvus) and ONNX Runtime. No core dump caught it, so the library and the moment stay unproven:
    this removes the teardown window (as worker processes commonly do with `os._exit`), and does not help if
    the abort came earlier. Nothing is lost by skipping it: every batch is committed, and the rank's result was
    gathered or written to done.json before this runs."""
    import atexit
    import logging

    atexit._run_exitfuncs()  # CPython's (private) runner: temp folders, weakref finalizers and other exit work
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def launch_command(num_processes: int, program: list[str]) -> list[str]:
    """The `accelerate launch` command line running `program` (`["-m", "app.cli", ...]`) in `num_processes`
    local processes, the CPU cores split between them. It always uses `--multi_gpu` (torchrun's launcher): one
    process per GPU, or on a machine without GPUs (or with CUDA_VISIBLE_DEVICES empty) that many CPU processes,
    which join by gloo because the programs make their Accelerator / PartialState with cpu=True when torch sees no
    GPU. accelerate's own `--cpu` starts one process unless MPI is set up, so it is not used."""
    from retrieval.server import free_port

    threads = max(1, (os.cpu_count() or 1) // num_processes)
    return [
        *(sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu"),
        *("--num_processes", str(num_processes), "--num_machines", "1", "--num_cpu_threads_per_process", str(threads)),
        *("--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(free_port())),
        *program,
    ]


def launch(argv: list[str], num_processes: int, index_dir: str | Path) -> int:
    """Run `vimrag ARGV` in `num_processes` processes via accelerate launch (one per GPU, or CPU with gloo)."""
    from retrieval.embedder_base import no_gpu_driver

    if no_gpu_driver():
        gpus = 0  # torch could see none: its import (seconds) is saved
    else:
        import torch

        gpus = torch.cuda.device_count()
    if gpus and num_processes > gpus:
        raise RetrievalError(
            f"--num-processes {num_processes} asks for more processes than this machine's {gpus} "
            f"GPUs; use one process per GPU (--num-processes {gpus})"
        )
    rc = subprocess.call(launch_command(num_processes, ["-m", "app.cli", *argv]))
    if rc != 0:
        print(
            f"vimrag index: a worker process failed (exit {rc}); {_kept(index_dir)}: rerun the same command to finish",
            file=sys.stderr,
        )
    return rc


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
