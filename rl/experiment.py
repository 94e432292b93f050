"""CPU experiment: GGPO against GRPO on a synthetic retrieval task, with a tiny causal LM, over several seeds.

    python -m rl.experiment --out runs/rl_experiment                  # 3 seeds x {ggpo, grpo}
    python -m rl.experiment --out /tmp/rlx --seeds 0 --updates 4      # a quick look

The task: lockers 1..N each have a value in their own small text file among look-alike files, a 4-digit
code (`--task code`) or one of four colours (`--task color`). "What is the code of locker 17?" needs the
right search (locker 17's file must be retrieved) and the right evidence (the value copied from it). The
reward is VimRAG's binary answer reward.

`--protocol vrag` (the default) is a chain of tag actions; `--protocol vimrag` writes JSON tool calls that
build a DAG, and with `--detour P` a share P of the expert's traces start with a vague dead-end search.
Only then do GGPO's success masks have anything to leave out, so that setting is the one that can tell
GGPO from GRPO; the extra curve it plots is the number of dead-end searches per trajectory.

Steps, all on CPU:
1. write the corpus and questions (train / held-out split) and index them;
2. build a tiny Qwen2 causal LM with a tokenizer trained on the corpus and the protocol's text;
3. warm start: run a scripted expert (search "locker K", answer the value it read) through the agent on
   the training questions and SFT the model on those traces;
4. from that one checkpoint, train with GGPO and with GRPO (same seeds, same budget), token level, and
   record every update's mean reward, agent steps and dead-end searches;
5. write the curves (PNG), a table of the final reward, the updates needed to reach a threshold and the
   held-out accuracy (markdown), training throughput (generated tokens/s) and the process's peak memory.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from agent.config import Config, setting, setting_like
from rl.config import TrainConfig

# Short system prompts: a tiny model's context should be the task, not instructions it cannot read.
SYSTEM = {
    "vimrag": (
        'You answer with one tool call per turn: <tool_call>{"name": ..., "arguments": {...}}'
        "</tool_call>. Tools: add_search_node(id, query, parent_ids); add_answer_node(answer, "
        "parent_ids)."
    ),
    "vrag": "Search with <search>query</search>, then answer with <answer>code</answer>.",
}


COLORS = ["red", "blue", "green", "yellow"]


def make_task(root: Path, n_lockers: int = 24, seed: int = 0, kind: str = "code") -> tuple[Path, Path, Path]:
    """(corpus dir, train questions, test questions). kind "code": a 4-digit code per locker (copying four
    digits); kind "color": one of four colours (copying one word; a guess is right 1 time in 4)."""
    rng = random.Random(seed)
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    rows = []
    for k in range(1, n_lockers + 1):
        if kind == "color":
            value, fact, question = rng.choice(COLORS), "is painted", f"What color is locker {k}?"
        else:
            value, fact, question = f"{rng.randint(1000, 9999)}", "code", f"What is the code of locker {k}?"
        (corpus / f"locker_{k:02d}.md").write_text(
            f"# Locker {k}\n\nLocker {k} {fact} {value}. Floor {rng.randint(1, 5)}.\n", encoding="utf-8"
        )
        rows.append(
            {
                "id": f"locker-{k:02d}",
                "question": question,
                "answer": [value],
                "evidence": [{"file": f"locker_{k:02d}.md"}],
            }
        )
    rng.shuffle(rows)
    cut = int(len(rows) * 0.75)
    train, test = root / "train.jsonl", root / "test.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows[:cut]))
    test.write_text("".join(json.dumps(r) + "\n" for r in rows[cut:]))
    return corpus, train, test


DETOUR_QUERY = "locker colors"  # a vague first search: it returns some lockers, rarely the one asked about


def scripted_traces(
    dataset: str,
    corpus: Path,
    index: Path,
    out: Path,
    protocol: str = "vimrag",
    detour: float = 0.0,
    max_steps: int = 4,
    seed: int = 0,
) -> int:
    """Traces of the scripted expert on every question of `dataset`; returns how many.

    vrag: `<search>locker K</search>`, then `<answer>` with the value read from the results.
    vimrag: add_search_node(s1, "locker K", parents [root]), then add_answer_node(value, parents [s1]),
    answering from the fresh results (no memorize step: a tiny LM cannot copy information ids).
    With probability `detour` (vimrag only) the expert first makes a vague search (DETOUR_QUERY, node s1,
    a dead end: nothing hangs off it), closes it with an empty memorize step (the demo's layout refuses a
    second search before one), and then makes the right one (s2), which the answer cites. Such a
    trajectory succeeds, so GRPO reinforces its dead end; GGPO's success mask leaves it out.
    """
    import re

    from agent.backends.scripted import ScriptedPolicy
    from agent.loop import Agent
    from agent.protocols import get as get_protocol
    from agent.settings import AgentConfig
    from eval.datasets import load_dataset
    from retrieval.retriever import Retriever

    proto = get_protocol(protocol)
    if detour and not proto.memorizes:
        raise ValueError("--detour needs --protocol vimrag: linear protocols chain every node, so no dead ends")
    ds = load_dataset(dataset, corpus=corpus)
    retriever = Retriever(index)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)

    def locker(q: str) -> str:
        return re.search(r"locker (\d+)", q).group(1)

    def seen_value(v) -> str:
        k = locker(v.question)
        for ev in v.evidence.by_id.values():
            m = re.search(rf"Locker {k} (?:code|is painted) (\w+)", ev.text)
            if m:
                return m.group(1)
        return "unknown"

    for item in ds.items:
        k = locker(item.question)
        if not proto.memorizes:  # a chain: search, then answer
            script = [
                proto.write("search", {"query": f"locker {k}"}),
                lambda m, v: proto.write("answer", {"answer": seen_value(v)}),
            ]
        else:
            right = "s2" if rng.random() < detour else "s1"
            # the dead end is closed with an empty memorize: the exact layout refuses a second search before it
            script = (
                [
                    proto.write("search", {"id": "s1", "query": DETOUR_QUERY, "parent_ids": ["root"]}),
                    proto.write("memorize", {"summarize": "", "memorize": []}),
                ]
                if right == "s2"
                else []
            )
            script += [
                proto.write("search", {"id": right, "query": f"locker {k}", "parent_ids": ["root"]}),
                lambda m, v, right=right: proto.write("answer", {"answer": seen_value(v), "parent_ids": [right]}),
            ]
        cfg = AgentConfig(protocol=protocol, max_steps=max_steps, top_k=2, prompts={"system": SYSTEM[protocol]})
        trace = Agent(retriever, ScriptedPolicy(script=script), cfg).ask(item.question)
        (out / f"{item.id}.json").write_text(json.dumps(trace.to_dict()))
    return len(ds.items)


def corpus_texts(corpus: Path, traces: Path) -> list[str]:
    """Text for the tokenizer: the corpus and the scripted traces' prompts and replies."""
    texts = [p.read_text() for p in sorted(corpus.glob("*.md"))]
    for t in sorted(traces.glob("*.json"))[:8]:
        d = json.loads(t.read_text())
        for s in d["steps"]:
            texts.append(s["output"])
            texts += [
                m["content"] if isinstance(m["content"], str) else " ".join(p.get("text", "") for p in m["content"])
                for m in s["messages"]
            ]
    return texts * 4


def run(args) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    from agent.settings import AgentConfig
    from eval.datasets import load_dataset
    from eval.runner import ensure_index
    from rl.config import SFTConfig
    from rl.sft import load_examples, train_sft
    from rl.tiny import build_tiny_causal_lm
    from rl.trainer import Trainer

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(args.to_dict(), indent=1))  # the resolved settings of the run
    corpus, train_q, test_q = make_task(out / "task", args.lockers, kind=args.task)
    dataset = f"jsonl:{train_q}"
    index = out / "task" / "index"
    ensure_index(load_dataset(dataset, corpus=corpus), str(index), progress=False)
    n = scripted_traces(dataset, corpus, index, out / "expert" / "traces", args.protocol, args.detour, args.max_steps)
    print(
        f"task: {args.lockers} lockers, {n} training questions; expert traces in {out / 'expert'}"
        + (f" ({args.detour:.0%} of them start with a dead-end search)" if args.detour else "")
    )
    if args.reuse_sft and (out / "sft" / "config.json").is_file():
        print(f"SFT warm start: reusing {out / 'sft'} (--reuse-sft)")
    else:
        base = build_tiny_causal_lm(
            out / "tiny_lm",
            seed=0,
            texts=corpus_texts(corpus, out / "expert" / "traces"),
            vocab_size=args.vocab,
            hidden=args.hidden,
            layers=args.layers,
        )
        exs = load_examples(str(out / "expert" / "traces"), with_images=False)
        t0 = time.perf_counter()
        cfg = SFTConfig("-", str(base), str(out / "sft"), epochs=args.sft_epochs, lr=args.sft_lr, grad_accum=1)
        sft = train_sft(cfg, examples=exs, progress=False)
        print(
            f"SFT warm start: {sft['examples']} steps x {args.sft_epochs} epochs in "
            f"{time.perf_counter() - t0:.0f} s, loss {sft['history'][0]['loss']:.3f} -> "
            f"{sft['history'][-1]['loss']:.3f}"
        )
    curves: dict[str, list[list[float]]] = {"ggpo": [], "grpo": []}
    dead: dict[str, list[list[float]]] = {"ggpo": [], "grpo": []}  # dead-end searches per trajectory
    steps: dict[str, list[list[float]]] = {"ggpo": [], "grpo": []}  # agent steps per trajectory
    heldout: dict[str, list[float]] = {"ggpo": [], "grpo": []}
    throughput, shares = [], []
    for seed in args.seeds:
        for method in ("ggpo", "grpo"):
            cfg = TrainConfig(
                model=str(out / "sft"),
                dataset=dataset,
                corpus=str(corpus),
                index=str(index),
                agent=AgentConfig(
                    protocol=args.protocol,
                    prompts={"system": SYSTEM[args.protocol]},
                    max_steps=args.max_steps,
                    top_k=2,
                ),
                method=method,
                level="token",
                temperature=args.temperature,
                group_size=args.group,
                questions_per_update=args.questions,
                updates=args.updates,
                lr=args.lr,
                max_new_tokens=args.max_new_tokens,
                reward="vimrag",
                save_every=0,
                output_dir=str(out / f"{method}_seed{seed}"),
                resume=False,
                seed=seed,
                log_with=[],
            )
            t0 = time.perf_counter()
            trainer = Trainer(cfg)
            logs = trainer.train(progress=False)
            curves[method].append([lg["reward"] for lg in logs])
            dead[method].append([lg["dead_end_searches"] for lg in logs])
            steps[method].append([lg["steps"] for lg in logs])
            heldout[method].append(held_out_accuracy(trainer, test_q, corpus, index, args))
            throughput += [lg["tokens_per_s"] for lg in logs]
            shares += [(lg["rollout_s"], lg["update_s"]) for lg in logs]
            print(
                f"{method} seed {seed}: reward {logs[0]['reward']:.2f} -> {logs[-1]['reward']:.2f}, dead-end "
                f"searches {logs[0]['dead_end_searches']:.2f} -> {logs[-1]['dead_end_searches']:.2f} "
                f"({time.perf_counter() - t0:.0f} s)"
            )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if torch.cuda.is_available():
        peak_mb = max(peak_mb, torch.cuda.max_memory_allocated() / 2**20)
    return summarize(curves, heldout, args, out, throughput, shares, peak_mb, plt, dead, steps)


def updates_to(curve: list[float], threshold: float, window: int = 3, below: bool = False) -> int | None:
    """The first update at which the running mean over `window` updates reaches `threshold` (falls to it,
    with `below`).

    >>> updates_to([0.0, 0.5, 1.0, 1.0], 0.5, window=2), updates_to([0.0, 0.1], 0.5)
    (3, None)
    >>> updates_to([0.5, 0.3, 0.1, 0.0], 0.1, window=2, below=True)
    4
    """
    for i in range(len(curve)):
        lo = max(0, i - window + 1)
        m = statistics.fmean(curve[lo : i + 1])
        if (m <= threshold if below else m >= threshold) and i + 1 >= window:
            return i + 1
    return None


def held_out_accuracy(trainer, test_q: Path, corpus: Path, index: Path, args, samples: int = 2) -> float:
    """Share of sampled answers that are right on the lockers never trained on (copying, not recall)."""
    from agent.loop import Agent
    from agent.settings import AgentConfig
    from eval.datasets import load_dataset
    from rl.trainer import make_policy

    ds = load_dataset(f"jsonl:{test_q}", corpus=corpus)
    policy = make_policy(trainer.acc.unwrap_model(trainer.model), trainer.proc, False, trainer.cfg)
    cfg = AgentConfig(
        protocol=args.protocol, max_steps=args.max_steps, top_k=2, prompts={"system": SYSTEM[args.protocol]}
    )
    right = n = 0
    for item in ds.items:
        for _ in range(samples):
            trace = Agent(trainer.get_retriever(), policy, cfg).ask(item.question)
            right += (trace.answer or "").strip() in item.answers
            n += 1
    return right / max(1, n)


def resummarize(args) -> dict:
    """The table, figure and printout again, from the curves an earlier run stored in OUT/results.json."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(args.out)
    path = out / "results.json"
    if not path.is_file():
        raise SystemExit(f"{path} does not exist: run the experiment into --out {out} first")
    data = json.loads(path.read_text())
    if "curves" not in data:
        raise SystemExit(f"{path} holds no curves (an older run): rerun the experiment to summarize it again")
    curves = data["curves"]
    args.seeds = list(range(len(next(iter(curves.values())))))
    heldout = {t["method"]: [t["held_out"]] if t.get("held_out") is not None else [] for t in data["table"]}
    return summarize(
        curves,
        heldout,
        args,
        out,
        [data["tokens_per_s_mean"]],
        [(data["rollout_share"], data["update_share"])],
        data["peak_rss_mb"],
        plt,
        data.get("dead_end_curves"),
        data.get("step_curves"),
    )


def _mean_curve(runs: list[list[float]]) -> list[float]:
    return [statistics.fmean(v) for v in zip(*runs)]


def summarize(curves, heldout, args, out: Path, throughput, shares, peak_mb, plt, dead=None, steps=None) -> dict:
    """Curves (PNG), the results table (markdown + JSON) and the throughput / memory / step-split lines."""
    dead = dead or {m: [] for m in curves}
    steps = steps or {m: [] for m in curves}
    show_dead = any(any(x for c in runs for x in c) for runs in dead.values())
    fig, axes = plt.subplots(1, 2 if show_dead else 1, figsize=(12 if show_dead else 7, 4), squeeze=False)
    colors = {"ggpo": "#2a7de1", "grpo": "#e1662a"}
    panels = [(axes[0][0], curves, "mean reward of the update's rollouts")]
    if show_dead:
        panels.append((axes[0][1], dead, "dead-end searches per trajectory"))
    for ax, data, ylabel in panels:
        for method, runs in data.items():
            for c in runs:
                ax.plot(range(1, len(c) + 1), c, color=colors[method], alpha=0.25, lw=1)
            mean = _mean_curve(runs)
            ax.plot(
                range(1, len(mean) + 1), mean, color=colors[method], lw=2.5, label=f"{method} (mean of {len(runs)})"
            )
        ax.set_xlabel("update")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0][0].set_ylim(-0.02, 1.02)
    fig.suptitle(f"GGPO vs GRPO, tiny causal LM, {len(args.seeds)} seeds (thin lines: single seeds)")
    fig.tight_layout()
    fig.savefig(out / "reward_curves.png", dpi=130)
    table = []
    for method, runs in curves.items():
        finals = [statistics.fmean(c[-3:]) for c in runs]
        row = {
            "method": method,
            "final": statistics.fmean(finals),
            "final_sd": statistics.pstdev(finals),
            "per_seed": finals,
            "reach": [updates_to(c, args.threshold) for c in runs],
            "first": statistics.fmean(c[0] for c in runs),
            "held_out": statistics.fmean(heldout[method]) if heldout[method] else None,
        }
        if dead[method]:
            row["dead_first"] = statistics.fmean(c[0] for c in dead[method])
            row["dead_final"] = statistics.fmean(statistics.fmean(c[-3:]) for c in dead[method])
            row["dead_per_seed"] = [statistics.fmean(c[-3:]) for c in dead[method]]
            row["steps_final"] = statistics.fmean(statistics.fmean(c[-3:]) for c in steps[method])
            row["dead_reach"] = [updates_to(c, args.dead_threshold, below=True) for c in dead[method]]
        table.append(row)
    extra = show_dead and all("dead_final" in t for t in table)
    lines = [
        f"| method | first update reward | final reward (last 3 updates; mean ± sd over seeds) | per seed | "
        f"updates to reach {args.threshold} (3-update running mean), per seed | held-out lockers |"
        + (
            " dead-end searches per trajectory, first → final (per seed) | updates until dead-end searches "
            f"≤ {args.dead_threshold} (3-update running mean), per seed | steps per trajectory, final |"
            if extra
            else ""
        ),
        "|---|---|---|---|---|---|" + ("---|---|---|" if extra else ""),
    ]
    for t in table:
        line = (
            f"| {t['method']} | {t['first']:.3f} | {t['final']:.3f} ± {t['final_sd']:.3f} | "
            + ", ".join(f"{x:.2f}" for x in t["per_seed"])
            + " | "
            + ", ".join(str(r) if r is not None else "not reached" for r in t["reach"])
            + " | "
            + (f"{t['held_out']:.2f}" if t["held_out"] is not None else "-")
            + " |"
        )
        if extra:
            line += (
                f" {t['dead_first']:.2f} → {t['dead_final']:.2f} ("
                + ", ".join(f"{x:.2f}" for x in t["dead_per_seed"])
                + ") | "
                + ", ".join(str(r) if r is not None else "not reached" for r in t["dead_reach"])
                + f" | {t['steps_final']:.2f} |"
            )
        lines.append(line)
    roll = sum(a for a, _ in shares)
    upd = sum(b for _, b in shares)
    summary = {
        "table": table,
        "tokens_per_s_mean": statistics.fmean(throughput) if throughput else 0.0,
        "peak_rss_mb": peak_mb,
        "rollout_share": roll / max(1e-9, roll + upd),
        "update_share": upd / max(1e-9, roll + upd),
        "markdown": "\n".join(lines),
        "curves": curves,
        "dead_end_curves": dead,
        "step_curves": steps,
    }
    (out / "results.json").write_text(json.dumps(summary, indent=1))
    (out / "results.md").write_text(summary["markdown"] + "\n")
    print("\n" + summary["markdown"])
    print(
        f"\ntraining throughput: {summary['tokens_per_s_mean']:.1f} generated tokens/s (mean over updates); "
        f"peak memory: {peak_mb:.0f} MB (process RSS)"
    )
    print(f"step time: rollout {summary['rollout_share']:.0%}, update {summary['update_share']:.0%}")
    print(f"curves: {out / 'reward_curves.png'}")
    return summary


TASKS = ("code", "color")
PROTOCOLS = ("vrag", "vimrag")


@dataclass
class ExperimentConfig(Config):
    """Every setting of the experiment; `python -m rl.experiment --help` lists them."""

    config_name = "experiment"

    out: str = setting("runs/rl_experiment", "run folder: corpus, models, results.json, the table and the curves")
    seeds: list[int] = setting(
        factory=lambda: [0, 1, 2], help="training seeds, each run with GGPO and with GRPO", nargs="+"
    )
    updates: int = setting_like(TrainConfig, "updates", 25)
    group: int = setting_like(TrainConfig, "group_size", 4)
    questions: int = setting_like(TrainConfig, "questions_per_update", 2)
    lr: float = setting_like(TrainConfig, "lr", 1e-4)
    lockers: int = setting(24, "lockers in the corpus (a quarter of them held out)")
    task: str = setting("code", "what a locker file holds: a 4-digit code, or one of four colours", choices=TASKS)
    hidden: int = setting(128, "hidden size of the tiny causal LM")
    layers: int = setting(2, "layers of the tiny causal LM")
    vocab: int = setting(900, "vocabulary size of the tokenizer trained on the corpus")
    sft_epochs: int = setting(60, "epochs of the SFT warm start on the expert's traces")
    sft_lr: float = setting(1e-3, "learning rate of the SFT warm start")
    max_new_tokens: int = setting_like(TrainConfig, "max_new_tokens", 16)
    threshold: float = setting(0.8, "the table reports the updates until the reward (3-update mean) reaches this")
    protocol: str = setting(
        "vrag", "vrag: short tag actions, a chain; vimrag: JSON tool calls that build a DAG", choices=PROTOCOLS
    )
    detour: float = setting(0.0, "vimrag only: share of expert traces that start with a dead-end search")
    max_steps: int = setting(4, "agent steps per trajectory")
    reuse_sft: bool = setting(False, "keep OUT/sft from an earlier run with the same task flags (skips steps 2-3)")
    temperature: float = setting_like(TrainConfig, "temperature", 1.0)
    dead_threshold: float = setting(
        0.1, "the table reports the updates until dead-end searches per trajectory drop to this"
    )
    resummarize: bool = setting(
        False, "only rewrite the table and figure from OUT/results.json (after a summary change)"
    )


def main(argv: list[str] | None = None) -> int:
    from agent.config import add_arguments, from_args

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap, ExperimentConfig)
    args = from_args(ExperimentConfig, ap.parse_args(argv))
    if args.resummarize:
        resummarize(args)
    else:
        run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
