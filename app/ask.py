"""`vimrag ask`: answer one question over an index, printing the agent's steps as they stream.

vimrag ask "What was revenue in 2024?" --index DIR [--backend embedded|openai|transformers]
           [--protocol vimrag|vrag|react|vanilla] [--trace out.json] [--graph out.png]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(sub, default_index: str) -> None:
    pa = sub.add_parser(
        "ask",
        help="answer a question with the agent",
        description="Answer a question over an index with the agent; prints each step "
        "(searches, memorized evidence, crops, zooms) and a cited answer.",
    )
    pa.add_argument("question", help="the question")
    pa.add_argument("--index", default=default_index, help="index folder (build one with `vimrag index`)")
    add_search_url(pa)
    g = pa.add_argument_group("policy backend")
    g.add_argument(
        "--backend",
        default="embedded",
        choices=["embedded", "openai", "transformers", "scripted"],
        help="embedded: offline default (no VLM); openai: any OpenAI-compatible endpoint (vLLM, "
        "SGLang, DashScope, OpenAI); transformers: a local Qwen2.5-VL/Qwen3-VL",
    )
    g.add_argument(
        "--model",
        default="",
        help="model name (openai), HF id or path (transformers), "
        "'keyword' (embedded without SmolLM2), script JSON (scripted)",
    )
    g.add_argument("--base-url", default="http://127.0.0.1:8000/v1", help="OpenAI-compatible endpoint")
    g.add_argument("--api-key", default="", help="API key (default: $OPENAI_API_KEY)")
    g.add_argument("--timeout", type=float, default=120.0, help="seconds per endpoint request")
    g.add_argument("--max-new-tokens", type=int, default=1024)
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--device", default="auto", help="transformers: auto | cpu | cuda")
    add_model_options(g)
    a = pa.add_argument_group("agent")
    add_agent_options(a)
    a.add_argument("--doc", action="append", help="search only this document; repeatable")
    o = pa.add_argument_group("output")
    o.add_argument("--trace", help="write the full trace (JSON) here")
    o.add_argument("--graph", help="draw the memory graph (PNG) here")
    o.add_argument("--show-model", action="store_true", help="also print the model's raw output")
    o.add_argument("--json", action="store_true", help="print only the final trace summary as JSON")
    pa.set_defaults(func=cmd_ask)


def cmd_ask(args: argparse.Namespace) -> int:
    from agent.backends.base import PolicyConfig, PolicyError, load_policy
    from agent.events import Finished
    from agent.loop import Agent
    from agent.state import AgentConfig
    from retrieval.retriever import open_retriever

    if not args.search_url and not Path(args.index).is_dir():
        raise FileNotFoundError(
            f"index folder {args.index} does not exist; build it with `vimrag index PATH --index {args.index}`"
        )
    cfg = AgentConfig(protocol=args.protocol, docs=args.doc, **agent_overrides(args))
    pcfg = PolicyConfig(
        backend=args.backend,
        model=args.model,
        base_url=args.base_url,
        api_key=args.api_key,
        timeout_s=args.timeout,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        device=args.device,
        **model_overrides(args),
    )
    try:
        policy = load_policy(pcfg)
    except PolicyError as e:
        raise ValueError(str(e)) from e
    agent = Agent(open_retriever(args.index, args.search_url, text_only=args.backend == "embedded"), policy, cfg)
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


def add_agent_options(group) -> None:
    """The agent settings `vimrag ask` and `vimrag eval` share."""
    from agent.protocols import get, names

    group.add_argument(
        "--protocol", default="vimrag", choices=list(names()), help="; ".join(f"{n}: {get(n).summary}" for n in names())
    )
    group.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="model calls per question (default: the protocol's own; vimrag 20, vrag 11)",
    )
    group.add_argument("--top-k", type=int, default=None, help="results per search (vimrag, react; default 3)")
    group.add_argument("--budget", type=int, default=None, help="pixel budget of the visual memory (vimrag)")
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


def agent_overrides(args) -> dict:
    """AgentConfig fields from the options above (those left at their default are not set)."""
    from agent.protocols import read_prompt_file

    out: dict = {}
    if args.max_steps is not None:
        out["max_steps"] = args.max_steps
    if args.top_k is not None:
        out["top_k"] = args.top_k
    if args.budget:
        out["s_total"] = args.budget
    if args.prompt_file:
        out["prompts"] = read_prompt_file(args.prompt_file, args.protocol, args.prompt_role)
    elif args.prompt_role:
        raise ValueError("--prompt-role names where a --prompt-file goes; give --prompt-file too")
    return out


def add_model_options(group) -> None:
    group.add_argument(
        "--tool-calling",
        default="text",
        choices=["text", "native", "auto"],
        help="openai backend: text (calls written in the reply, as the VimRAG demo reads them), native "
        "(send `tools`, read `tool_calls`), auto (native, else text)",
    )
    group.add_argument(
        "--coords",
        default="auto",
        choices=["auto", "absolute", "relative"],
        help="how the model writes boxes: auto (Qwen3-VL 0-1000 relative, others absolute pixels)",
    )


def model_overrides(args) -> dict:
    return {"tool_calling": args.tool_calling, "coords": args.coords}


def format_event(ev, show_model: bool = False) -> str | None:
    """One printable line per event (None for events not worth a line)."""
    k = ev.kind
    if k == "step_started":
        return (
            f"[step {ev.step}] context: {ev.image_pixels:,} image px (~{ev.visual_tokens:,} visual tokens), "
            f"~{ev.text_tokens:,} text tokens"
        )
    if k == "model_output" and ev.done and show_model:
        return "  model: " + ev.text.strip().replace("\n", "\n         ")
    if k == "search_results":
        found = "; ".join(f"{r['info_id']} {r['citation']}" for r in ev.results) or "nothing"
        how = f"region of {ev.by_image}" if ev.by_image else repr(ev.query)
        return f"  search {ev.node_id}: {how} -> {found}"
    if k == "memorized":
        kept = ", ".join(f"{i['info_id']} (p{i['priority']})" for i in ev.items if i["useful"]) or "nothing"
        return f"  memorize {ev.node_id}: kept {kept}; summary: {ev.summary[:120]}"
    if k == "cropped":
        return f"  crop {ev.source_info_id} {ev.bbox_seen} -> {ev.info_id} {ev.citation}"
    if k == "scaled":
        return f"  scale {ev.source_info_id} x{ev.factor} -> {ev.info_id} ({ev.pixels:,} px)"
    if k == "error":
        return f"  ! {ev.message}"
    if k == "limit_reached":
        return f"  ! {ev.message}"
    return None


def format_answer(trace) -> str:
    if trace.answer is None:
        return f"\nno answer ({trace.status}). {trace.error}".rstrip()
    lines = [f"\nanswer: {trace.answer}"]
    sup = trace.support or {}
    if sup.get("sentence"):
        lines.append(f'  read from: "{sup["sentence"]}" ({sup.get("citation") or sup.get("info_id")})')
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
