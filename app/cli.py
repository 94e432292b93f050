"""The `vimrag` command line: index a corpus, search it, serve it over HTTP.

    vimrag index PATH... --index DIR      add PDFs, images, videos and text under PATH to an index
    vimrag search "QUERY" --index DIR     print the best hits with file, page / time span and score
    vimrag serve-search --index DIR       the VRAG/VimRAG-compatible HTTP search API on 127.0.0.1
    vimrag ask "QUESTION" --index DIR     answer with the agent, printing its steps and a cited answer
    vimrag demo                           the web demo on http://127.0.0.1:7860 (bundled corpus)
    vimrag eval --dataset NAME            evaluate the agent on a benchmark; `vimrag eval compare RUN...`
    vimrag train --config CFG.yaml        GGPO / GRPO / GSPO fine-tuning (also under accelerate launch)
    vimrag sft --traces RUN --model M     SFT cold start on saved traces (loss on action tokens only)
    vimrag synth questions --corpus DIR   training data from your corpus: verified questions, teacher trajectories

Every subcommand takes --help. Errors print one line saying what to do and exit non-zero.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def _quiet_model_loading() -> None:
    """Our own progress bars say what is happening; transformers' per-load weight bars are noise here."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def _default_index() -> str:
    from retrieval.retriever import DEFAULT_INDEX

    return DEFAULT_INDEX


def cmd_index(args: argparse.Namespace) -> int:
    from agent.config import from_args
    from retrieval import sharded
    from retrieval.ingest import Indexer, IngestConfig

    cfg = from_args(IngestConfig, args)
    _milvus_token(args)
    if sharded.world_size() > 1:  # one of N processes under accelerate launch / torchrun (or --num-processes)
        summary = sharded.index_distributed(args.paths, args.index, cfg, prune=args.prune, progress=not args.quiet)
        if summary is None:  # not rank 0: rank 0 merges the shards and prints the summary
            sharded.leave_worker(0)
    elif args.num_processes > 1:
        return sharded.launch(args.argv, args.num_processes, args.index)
    else:
        summary = Indexer(args.index, cfg).index(args.paths, prune=args.prune, progress=not args.quiet)
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2))
    else:
        print(summary.format())
    ok = summary.files_indexed + summary.unchanged
    return 0 if ok or not (summary.failed or summary.skipped) else 1


def cmd_search(args: argparse.Namespace) -> int:
    from retrieval.retriever import Retriever
    from retrieval.units import Filters

    if (args.query is None) == (args.image is None):
        raise SystemExit("vimrag search: give a QUERY or --image PATH (one of them)")
    query = args.query
    if args.image:
        from retrieval.loaders import open_image

        query = open_image(args.image)
    filters = Filters(
        docs=args.doc or None, modalities=args.modality or None, time_span=tuple(args.time) if args.time else None
    )
    retriever = Retriever(args.index)
    hits = retriever.search(query, k=args.k, filters=filters, mode=args.mode, dynamic=args.dynamic)
    if args.json:
        print(json.dumps([h.to_dict() for h in hits], indent=2, ensure_ascii=False))
        return 0
    if not hits:
        print("no hits")
        return 0
    for h in hits:
        u = h.unit
        detail = " ".join(f"{m}={s:.3f}" for m, s in h.scores.items())
        snippet = " ".join(u.text.split())[: args.snippet]
        print(f"{h.rank:>2}. {h.score:.4f}  {u.source}  [{u.location() or u.modality}]  ({detail})")
        if snippet:
            print(f"    {snippet}")
    return 0


def _milvus_token(args: argparse.Namespace) -> None:
    """--milvus-token reaches every Milvus client of this process (and of the workers it starts) as the variable
    readers use; it is never written to the index folder."""
    if getattr(args, "milvus_token", None):
        from retrieval.milvus_client import TOKEN_ENV

        os.environ[TOKEN_ENV] = args.milvus_token


def _add_token_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--milvus-token",
        metavar="TOKEN",
        help="token (USER:PASSWORD or API key) for a Milvus server with authentication; else $VIMRAG_MILVUS_TOKEN, "
        "which keeps it out of the process list",
    )


def cmd_serve_search(args: argparse.Namespace) -> int:
    from retrieval.server import serve

    _milvus_token(args)
    before = None
    if args.tool_latency:
        from agent.latency import parse_latency

        delays = parse_latency(args.tool_latency)  # a clear error for a bad SPEC, before the server starts

        def before() -> None:
            delays.delay("search")

    serve(args.index, host=args.host, port=args.port, before_search=before, workers=args.workers)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from agent.config import add_arguments
    from retrieval.ingest import IngestConfig
    from retrieval.retriever import MODES

    p = argparse.ArgumentParser(
        prog="vimrag", description="VimRAG: multimodal deep research over PDFs, images and videos."
    )
    sub = p.add_subparsers(dest="command", required=True)

    pi = sub.add_parser(
        "index",
        help="index PDFs, images, videos and text files",
        description="Add every PDF, image, video and text file under PATH... to an index. Re-running "
        "adds only new or changed files; --prune forgets deleted ones.",
    )
    pi.add_argument("paths", nargs="+", metavar="PATH", help="files or folders to index")
    pi.add_argument("--index", default=_default_index(), help="index folder (default: $VIMRAG_INDEX or ./vimrag-index)")
    pi.add_argument("--prune", action="store_true", help="forget indexed files under PATH that no longer exist")
    pi.add_argument("--json", action="store_true", help="print the summary as JSON")
    pi.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    pi.add_argument(
        "--num-processes",
        type=int,
        default=1,
        metavar="N",
        help="embed in N processes (one per GPU, or CPU processes) and merge their shards into one "
        "index; the same as running under `accelerate launch --multi_gpu --num_processes N -m app.cli`",
    )
    add_arguments(pi.add_argument_group("indexing (IngestConfig)"), IngestConfig)
    _add_token_option(pi)
    pi.set_defaults(func=cmd_index)

    ps = sub.add_parser(
        "search",
        help="search an index",
        description="Search an index; prints file, page or time span, and score for each hit.",
    )
    ps.add_argument("query", nargs="?", help="the query text")
    ps.add_argument("--image", help="search by an image (a crop) instead of text")
    ps.add_argument("--index", default=_default_index(), help="index folder")
    ps.add_argument("-k", type=int, default=5, help="number of hits (the maximum, with --dynamic)")
    ps.add_argument("--mode", default="hybrid", choices=MODES, help="how to rank: BM25 + dense fused, or one of them")
    ps.add_argument("--dynamic", action="store_true", help="ViDoRAG dynamic top-k (Gaussian-mixture cut)")
    ps.add_argument("--doc", action="append", help="only this document (file name or path); repeatable")
    ps.add_argument("--modality", action="append", choices=["page", "image", "video", "text"], help="repeatable")
    ps.add_argument(
        "--time", nargs=2, type=float, metavar=("START", "END"), help="video clips overlapping this span (s)"
    )
    ps.add_argument("--snippet", type=int, default=160, help="characters of text to show per hit")
    ps.add_argument("--json", action="store_true", help="print hits as JSON")
    ps.set_defaults(func=cmd_search)

    pv = sub.add_parser(
        "serve-search",
        help="serve the VRAG/VimRAG-compatible search API",
        description="POST /search {queries, top_k} -> {results: [{score, indice, data}]} (VimRAG's "
        "shape; PDF pages come as cached JPEGs); GET /search?queries=Q or POST with "
        "vrag_ret -> [[{idx, image_file}]] (VRAG's); GET /files?path=P serves corpus "
        "files and cached page images only.",
    )
    pv.add_argument("--index", default=_default_index(), help="index folder")
    pv.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    pv.add_argument("--port", type=int, default=8002)
    pv.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="N processes serving the one index (gunicorn, preloaded: the index and the model load once and "
        "the workers share their memory); about one per core",
    )
    pv.add_argument(
        "--tool-latency",
        default="",
        metavar="SPEC",
        help="tests and benchmarks: delay each search request, e.g. fixed:0.5 or heavy:0.2 (agent/latency.py); "
        "requests wait at the same time, as on a real remote service",
    )
    _add_token_option(pv)
    pv.set_defaults(func=cmd_serve_search)

    from app.ask import add_parser as add_ask

    add_ask(sub, _default_index())
    from app.web import add_parser as add_demo

    add_demo(sub)
    from app.evaluate import add_parser as add_eval

    add_eval(sub)
    from app.train import add_parser as add_train
    from app.train import add_sft_parser

    add_train(sub)
    add_sft_parser(sub)
    from app.synth import add_parser as add_synth

    add_synth(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # `index --num-processes` reruns it in each worker
    _quiet_model_loading()
    from retrieval.errors import RetrievalError

    try:
        return args.func(args)
    except (RetrievalError, ValueError, FileNotFoundError, ImportError, RuntimeError) as e:
        print(f"vimrag {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"vimrag {args.command}: interrupted; what was committed is kept, rerun to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
