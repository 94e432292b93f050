"""`vimrag ask`: answer one question over an index, printing the agent's steps as they stream.

vimrag ask "What was revenue in 2024?" --index DIR [--backend NAME] [--protocol NAME] [--trace out.json]
           [--graph out.png]

The policy and agent flags are generated from `PolicyConfig` and `AgentConfig` (agent/config.py), so they
are the same here, in `vimrag eval` and in `vimrag demo`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path


def add_parser(sub, default_index: str) -> None:
    from agent.backends.base import PolicyConfig
    from agent.config import add_arguments
    from agent.settings import AgentConfig

    pa = sub.add_parser(
        "ask",
        help="answer a question with the agent",
        description="Answer a question over an index with the agent; prints each step "
        "(searches, memorized evidence, crops, zooms) and a cited answer.",
    )
    pa.add_argument("question", help="the question")
    pa.add_argument("--index", default=default_index, help="index folder (build one with `vimrag index`)")
    add_search_url(pa)
    add_arguments(pa.add_argument_group("policy: the model that answers"), PolicyConfig, "policy.")
    agent = pa.add_argument_group("agent")
    add_arguments(agent, AgentConfig, "agent.")
    add_prompt_file(agent)
    o = pa.add_argument_group("output")
    o.add_argument("--trace", help="write the full trace (JSON) here")
    o.add_argument("--graph", help="draw the memory graph (PNG) here")
    o.add_argument("--show-model", action="store_true", help="also print the model's raw output")
    o.add_argument("--json", action="store_true", help="print only the final trace summary as JSON")
    pa.set_defaults(func=cmd_ask)


def cmd_ask(args: argparse.Namespace) -> int:
    from agent.backends.base import PolicyConfig, PolicyError, load_policy
    from agent.config import from_args
    from agent.events import Finished
    from agent.loop import Agent
    from agent.settings import AgentConfig
    from retrieval.retriever import open_retriever

    if not args.search_url and not Path(args.index).is_dir():
        raise FileNotFoundError(
            f"index folder {args.index} does not exist; build it with `vimrag index PATH --index {args.index}`"
        )
    cfg = with_prompt_file(from_args(AgentConfig, args, "agent."), args)
    pcfg = from_args(PolicyConfig, args, "policy.")
    try:
        policy = load_policy(pcfg)
    except PolicyError as e:
        raise ValueError(str(e)) from e
    agent = Agent(open_retriever(args.index, args.search_url, text_only=pcfg.backend == "embedded"), policy, cfg)
    out = sys.stdout
    if not args.json:
        print(f"backend: {policy.describe()}\nprotocol: {cfg.protocol}\n", file=out)
    trace = None
    try:
        for ev in agent.stream(args.question):
            if isinstance(ev, Finished):
                trace = ev.trace
            elif not args.json:
                line = format_event(ev, args.show_model)
                if line:
                    print(line, file=out, flush=True)
    finally:
        policy.close()
    if args.trace:
        Path(args.trace).write_text(json.dumps(trace.to_dict(), indent=1, ensure_ascii=False))
    if args.graph:
        from agent.evidence import EvidenceStore
        from memory_graph.draw import draw_graph

        store = EvidenceStore.from_dict(trace.evidence)
        draw_graph(trace.memory_graph(), thumbnails=store.thumbnail, path=args.graph)
    if args.json:
        print(
            json.dumps(
                {
                    "answer": trace.answer,
                    "status": trace.status,
                    "citations": trace.citations,
                    "steps": len(trace.steps),
                    "timings": trace.timings,
                },
                indent=1,
                ensure_ascii=False,
            )
        )
    else:
        print(format_answer(trace), file=out)
        if args.trace:
            print(f"trace written to {args.trace}", file=out)
    if trace.status == "error":
        print(f"vimrag ask: error: {trace.error}", file=sys.stderr)
        return 2
    return 0 if trace.status == "answered" else 1


def add_search_url(parser) -> None:
    parser.add_argument(
        "--search-url",
        default="",
        metavar="URL",
        help="send every search to this search server instead of a local index: `vimrag "
        "serve-search`'s or VRAG's (e.g. http://127.0.0.1:8002/search)",
    )


def add_prompt_file(group) -> None:
    """--prompt-file / --prompt-role, which `vimrag ask` and `vimrag eval` read into the agent's prompts."""
    group.add_argument(
        "--prompt-file",
        help="the protocol's prompt(s) from a file: plain text is one prompt (see "
        "--prompt-role); JSON/YAML maps names to texts (vimrag: system, user, "
        "summary; vrag: user, system, nudge, invalid)",
    )
    group.add_argument(
        "--prompt-role",
        default="",
        help="which prompt a plain-text --prompt-file replaces: user or "
        "system (default: user for vrag, system otherwise)",
    )


def with_prompt_file(agent, args):
    """AgentConfig `agent` with the prompts of --prompt-file, if one was given, over its own."""
    from agent.protocols import read_prompt_file

    if not args.prompt_file:
        if args.prompt_role:
            raise ValueError("--prompt-role names where a --prompt-file goes; give --prompt-file too")
        return agent
    read = read_prompt_file(args.prompt_file, agent.protocol, args.prompt_role)
    return replace(agent, prompts={**agent.prompts, **read})


def format_event(ev, show_model: bool = False) -> str | None:
    """One printable line per event (None for events not worth a line)."""
    from agent.events import (
        Cropped,
        ErrorEvent,
        LimitReached,
        Memorized,
        ModelOutput,
        Scaled,
        SearchResults,
        StepStarted,
    )

    if isinstance(ev, StepStarted):
        return (
            f"[step {ev.step}] context: {ev.image_pixels:,} image px (~{ev.visual_tokens:,} visual tokens), "
            f"~{ev.text_tokens:,} text tokens"
        )
    if isinstance(ev, ModelOutput) and ev.done and show_model:
        return "  model: " + ev.text.strip().replace("\n", "\n         ")
    if isinstance(ev, SearchResults):
        found = "; ".join(f"{r.info_id} {r.citation}" for r in ev.results) or "nothing"
        how = f"region of {ev.by_image}" if ev.by_image else repr(ev.query)
        return f"  search {ev.node_id}: {how} -> {found}"
    if isinstance(ev, Memorized):
        kept = ", ".join(f"{i.info_id} (p{i.priority})" for i in ev.items if i.useful) or "nothing"
        return f"  memorize {ev.node_id}: kept {kept}; summary: {ev.summary[:120]}"
    if isinstance(ev, Cropped):
        return f"  crop {ev.source_info_id} {ev.bbox_seen} -> {ev.info_id} {ev.citation}"
    if isinstance(ev, Scaled):
        return f"  scale {ev.source_info_id} x{ev.factor} -> {ev.info_id} ({ev.pixels:,} px)"
    if isinstance(ev, ErrorEvent):
        return f"  ! {ev.message}"
    if isinstance(ev, LimitReached):
        return f"  ! {ev.message}"
    return None


def format_answer(trace) -> str:
    if trace.answer is None:
        return f"\nno answer ({trace.status}). {trace.error}".rstrip()
    lines = [f"\nanswer: {trace.answer}"]
    sup = trace.support or {}
    if sup.get("sentence"):  # an abstention keeps the sentence of the answer it did not give
        what = "its best reading was from" if sup.get("candidate") else "read from"
        lines.append(f'  {what}: "{sup["sentence"]}" ({sup.get("citation") or sup.get("info_id")})')
    if sup.get("note"):
        lines.append(f"  note: {sup['note']}")
    for c in trace.citations:
        lines.append(f"  - {c['citation']}")
    t = trace.timings
    lines.append(
        f"({len(trace.steps)} steps, {t.get('total_s', 0):.1f} s: model {t.get('model_s', 0):.1f} s, "
        f"retrieval {t.get('retrieval_s', 0):.1f} s, agent {t.get('agent_s', 0):.2f} s)"
    )
    return "\n".join(lines)
