"""Compare RL methods on the procedural gym (rl/gym.py) with a tiny causal LM on CPU, over several seeds.

    python -m rl.experiment --methods grpo,gspo,ggpo,gppo,aepo,adora --seeds 5      # the comparison in RESULTS.md
    python -m rl.experiment --methods grpo --seeds 5 --curriculum scalinginter       # with the horizon schedule
    python -m rl.experiment --methods grpo,gspo --seeds 5 --jobs 1                    # one run at a time
    python -m rl.experiment --methods grpo --seeds 1 --updates 3 --out /tmp/rlx      # a quick look
    python -m rl.experiment --protocol vrag --fine-print 0.2 --mid-frames 0.3 --crop-repeat 3 --rl-hops 1 2 \
        --methods grpo,ggpo --seeds 5 --out runs/rl_fine                                # pictures: crops learned
    python -m rl.experiment --methods grpo --seeds 5 --fresh-rl-names --out runs/rl_fresh  # RL on unseen names
    python -m rl.experiment --seeds 0 --sft-seed 1 --out runs/sft_seed1                      # a warm start alone
    python -m rl.experiment --seeds 0 --name-syllables 3 --sft-epochs 14 --out runs/sft_syl3

Steps:
1. environments: an SFT pool and a disjoint RL pool of training environments (1- and 2-hop questions), and
   held-out 1-hop and 2-hop environments (names, layouts and wordings never seen in training); one corpus and
   one cached index for all of them;
2. a tiny Qwen2 causal LM whose tokenizer is trained on training text only, warm-started by SFT on a scripted
   expert's traces through the real agent loop (rl/gym_agents.py: on the vimrag protocol, `VimragExpert` opens a
   search node per name, memorizes the code and partner, searches again from the same parent after a miss, and
   answers from the last hop's node; on vrag, `Expert` searches, checks the page, hops and copies the code);
3. its held-out accuracy: the share of held-out questions answered right, one greedy episode each;
4. from that one checkpoint, RL with each method and seed (same budget, same fresh RL environments, several
   optimizer steps per batch: `--ppo-epochs`, `--mini-batch-size`), then the held-out accuracy again;
5. the tables (rl/experiment_report.py: held-out 1- and 2-hop accuracy, mean and 95% interval over seeds; each
   method minus the first seed by seed, and GGPO minus GSPO, the paper's ablation; whether each method could act,
   from its clip fraction and masks; steps and dead-end searches per episode; what each method did in training:
   optimizer steps, clip fraction, the steps masked by outcome and kind), the reward curves and the accuracy chart,
   in OUT/results.md, results.json and PNGs.

`--protocol vimrag` (the default) runs the gym on VimRAG's DAG protocol, where dead ends exist; `--protocol vrag` on
VRAG's chain of tag actions. With `--fine-print F` (vrag only), a share F of the training environments are page
images whose codes may be in fine print, legible only in a crop, read by OCR for the text-only model (rl/gym.py), and
held-out fine-print 1-hop environments get their own column and a pictures table (crops per episode, the share of
episodes that crop on fine-print and on plain pages, crop precision; rl/experiment_eval.py). `--crop-repeat K`
imitates the expert traces that crop K times, and `--mid-frames P` asks a share P of training questions with the
name mid-sentence: the two levers that made the crop learnable (rl/RESULTS.md, "Crops learned").
With `--fresh-rl-names`, the RL pool's people are named with training words the SFT pool never uses, so RL
rewards copying unseen names. `--name-syllables 3` names people
with words too many to memorize, and `--varied-layouts` assembles training pages and questions from parts
(rl/RESULTS.md, "Names that cannot be memorized"); `--noise-words P` adds made-up words to a share P of them.
`--copy-pretrain N` trains the new tiny LM to copy (rl/pretrain.py) before SFT (rl/RESULTS.md, "Copy pre-training
and noise words"), in up to `--copy-rounds` rounds. The defaults are the setting of rl/RESULTS.md's comparison on the
vimrag protocol. Its earlier sections ran on the vrag protocol under earlier defaults; `--protocol vrag --ppo-epochs
1 --mini-batch-size 0 --sft-envs 1000 --sft-epochs 9 --test-envs 45 --updates 12 --group 8 --eval-hops 2` restores
the vrag comparison's, except GGPO's row (it trained on GRPO's token-level loss then, and trains on GSPO's now), and
these flags, put before a command's own, the ones before it: `--sft-seed 0 --copy-pretrain 0 --copy-rounds 1
--no-varied-layouts --noise-words 0 --test-envs 15 --rl-hops 1 2 --updates 8 --group 4 --questions 2`. Left out on
purpose: a VLM, and any GPU.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from rl.config import TrainConfig
from rl.experiment_config import RECALL_HINT, ExperimentConfig
from rl.experiment_eval import evaluate, first_moves


@dataclass
class Gym:
    """Where one experiment's environments live, and the ones it uses."""

    root: Path
    sft: list = field(default_factory=list)
    rl: list = field(default_factory=list)
    held: dict = field(default_factory=dict)  # hops -> environments

    @property
    def index(self) -> Path:
        return self.root / "index"


VIMRAG_TRAPS = 3  # dead-end pages per vimrag environment: a name's first search misses its page more often


def gym_traps(protocol: str) -> int:
    """Dead-end pages per environment: the vrag gym's 1 (as rl/RESULTS.md's runs had), VIMRAG_TRAPS for vimrag."""
    return VIMRAG_TRAPS if protocol == "vimrag" else 1


def refuse_unrunnable(args) -> None:
    """Stop, before anything is built, on what the protocol cannot run."""
    if args.protocol == "vimrag" and args.fine_print:
        raise SystemExit("--fine-print needs picture environments, which the gym runs on --protocol vrag only")


VALIDATION_ENVS = 10  # RL-pool environments the warm start is also measured on (30 questions)
FINE_SHARE = 0.5  # in a training picture environment, the chance that a person's code is in fine print


def make_gym(args, root: Path) -> Gym:
    import random

    from rl.gym import build_index, make_env, write_corpus, write_questions

    traps = gym_traps(args.protocol)

    def train_env(s: int, pool: str):  # a share `fine_print` of the training environments are pictures
        fine = FINE_SHARE if args.fine_print and random.Random(f"pictures:{s}").random() < args.fine_print else 0.0
        pool = pool if args.fresh_rl_names else "all"
        kw = {"syllables": args.name_syllables, "varied": args.varied_layouts, "noise": args.noise_words}
        kw["mid"] = args.mid_frames
        return make_env(s, "train", hops=(1, 2), fine_print=fine, pool=pool, traps=traps, **kw)

    g = Gym(root)
    g.sft = [train_env(s, "sft") for s in range(args.sft_envs)]
    g.rl = [train_env(s, "rl") for s in range(args.sft_envs, args.sft_envs + args.rl_envs)]
    held = partial(make_env, split="test", syllables=args.name_syllables, traps=traps)
    g.held = {h: [held(10_000 * h + s, hops=(h,)) for s in range(args.test_envs)] for h in (1, 2)}
    if args.fine_print:  # held-out 1-hop questions whose every code is in fine print: the crop skill alone
        g.held["fine"] = [held(30_000 + s, hops=(1,), fine_print=1.0) for s in range(args.test_envs)]
    every = g.sft + g.rl + [e for envs in g.held.values() for e in envs]
    write_corpus(every, root / "corpus")
    write_questions(g.rl, root / "rl.jsonl", hops=args.rl_hops)
    t0 = time.perf_counter()
    build_index(root / "corpus", g.index, progress=bool(args.fine_print), pictures=bool(args.fine_print))
    print(f"gym: {len(every)} environments, index ready in {time.perf_counter() - t0:.0f} s ({g.index})")
    return g


def expert_dead_ends(traces: Path, ids: set[str]) -> tuple[int, int] | None:
    """How many of the saved expert traces of `ids` hold a dead-end search, of how many (None when there are none)."""
    from rl.ggpo import dead_end_searches

    files = [f for f in traces.glob("*.json") if f.stem in ids]
    if not files:
        return None
    return sum(dead_end_searches(json.loads(f.read_text())["graph"]) > 0 for f in files), len(files)


def warm_start(args, g: Gym, out: Path, retriever) -> Path:
    """The SFT checkpoint: expert traces on the SFT pool, a tokenizer and tiny LM built on training text only."""
    from rl.config import SFTConfig
    from rl.gym_agents import expert_traces
    from rl.sft import load_examples, train_sft
    from rl.tiny import build_tiny_causal_lm

    sft_dir = out / "sft"
    if args.reuse_sft and (sft_dir / "sft_config.json").is_file():
        print(f"SFT warm start: reusing {sft_dir} (--reuse-sft)")
        return sft_dir
    traces = out / "expert"
    pairs = [(e, q) for e in g.sft for q in e.questions]
    n = expert_traces(pairs, retriever, traces, args.max_steps, pictures=bool(args.fine_print), protocol=args.protocol)
    dead = expert_dead_ends(traces, {q.id for _, q in pairs})
    if dead:
        print(f"expert traces: {dead[0]} of {dead[1]} hold a dead-end search (a search off the answer's path)")
    ids = {q.id for _, q in pairs}
    for f in [*traces.glob("*.json"), *traces.glob("*.key")]:  # an earlier run's questions that this one lacks
        if f.stem not in ids:
            f.unlink()
    texts = ["\n\n".join(e.pages) for e in g.sft]  # training text only: no held-out name or wording
    for f in sorted(traces.glob("*.json"))[:100]:
        for s in json.loads(f.read_text())["steps"]:
            texts.append(s["output"])
            texts += [m["content"] for m in s["messages"] if isinstance(m["content"], str)]
    base = build_tiny_causal_lm(
        out / "tiny_lm", seed=args.sft_seed, texts=texts, vocab_size=args.vocab, hidden=args.hidden, layers=args.layers
    )
    if args.copy_pretrain:
        from rl.pretrain import copy_pretrain

        st = copy_pretrain(
            base, args.copy_pretrain, seed=args.sft_seed, until=args.copy_recall, rounds=args.copy_rounds
        )
        print(
            f"copy pre-training: {st['rounds']} x {st['steps']} updates in {st['seconds']:.0f} s, "
            f"loss {st['loss']:.3f}, recall {st['recall_before']:.2f} -> "
            + " -> ".join(f"{r:.2f}" for r in st["recall_by_round"])
            + (
                f"; below {RECALL_HINT}: in rl/RESULTS.md's five seeds, the two starts whose recall stayed this low "
                "after one round answered 4% and 13% of held-out 1-hop questions, and 84% and 87% after a second "
                "(--copy-rounds 4)"
                if st["recall_after"] < RECALL_HINT
                else ""
            )
        )
    exs = load_examples(str(traces), with_images=False)
    if args.crop_repeat > 1:  # the SFT mix: traces that crop, imitated crop_repeat times
        cropping = {e.source.split(" step ")[0] for e in exs if e.target.startswith("<bbox>")}
        exs += [e for e in exs if e.source.split(" step ")[0] in cropping] * (args.crop_repeat - 1)
        print(f"SFT mix: {len(cropping)} traces that crop, each {args.crop_repeat} times")
    t0 = time.perf_counter()
    cfg = SFTConfig(
        "-",
        str(base),
        str(sft_dir),
        epochs=args.sft_epochs,
        lr=args.sft_lr,
        grad_accum=1,
        batch_size=args.sft_batch,
        schedule="linear",
        warmup=0.02,
        seed=args.sft_seed,
        mixed_precision="bf16" if args.mixed_precision == "bf16" else "no",
        # vimrag prompts vary from 60 to 470 tokens; the vrag gym's runs in rl/RESULTS.md were made without grouping
        group_by_length=args.protocol == "vimrag",
    )
    hist = train_sft(cfg, examples=exs, progress=True)["history"]
    losses = ", ".join(f"{h['loss']:.3f}" for h in hist)
    print(
        f"SFT warm start: {n} expert traces, {len(exs)} steps x {args.sft_epochs} epochs in "
        f"{time.perf_counter() - t0:.0f} s, loss {hist[0]['loss']:.3f} -> {hist[-1]['loss']:.3f} "
        f"(per epoch: {losses})"
    )
    return sft_dir


def train_one(args, g: Gym, sft: Path, out: Path, method: str, seed: int) -> tuple[list[dict], object]:
    from rl.gym_agents import agent_config
    from rl.trainer import Trainer

    kw = {}
    if args.curriculum == "scalinginter":  # short episodes first: one search and the answer, then room to hop
        kw = {"horizons": [3, args.max_steps], "horizon_every": max(1, args.updates // 2)}
    cfg = TrainConfig(
        model=str(sft),
        dataset=f"jsonl:{g.root / 'rl.jsonl'}",
        corpus=str(g.root / "corpus"),
        index=str(g.index),
        agent=agent_config(args.max_steps, bool(args.fine_print), args.protocol),
        method=method,  # ggpo at sequence level: GSPO's objective plus the graph mask, as the paper builds it
        ppo_epochs=args.ppo_epochs,
        mini_batch_size=args.mini_batch_size,
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
        lockstep=args.lockstep,
        mixed_precision=args.mixed_precision,
        **kw,
    )
    cfg.validate()
    trainer = Trainer(cfg)
    return trainer.train(progress=False), trainer


# what each update's log says about the method at work, kept per update for the report (rl/experiment_report.py)
TRAIN_METRICS = (
    "optimizer_steps",
    "clip_frac",
    "ratio_mean",
    "ratio_max",
    "successes_with_dead_end",
    "dead_ends_per_success",
    "masked_success",
    "masked_failure",
    *(f"masked_{o}_{k}" for o in ("success", "failure") for k in ("dead_end", "valuable", "answer", "malformed")),
)


def one_run(args, g: Gym, sft: Path, out: Path, method: str, seed: int, retriever) -> tuple[str, dict, str]:
    """RL with one method and seed from the SFT checkpoint, then its held-out accuracy: (method, record, log line)."""
    t0 = time.perf_counter()
    logs, trainer = train_one(args, g, sft, out, method, seed)
    trained = trainer.acc.unwrap_model(trainer.model).eval()
    tok = trainer.proc
    measured = [*args.eval_hops, *(["fine"] if "fine" in g.held else [])]
    held = {h: evaluate(trained, tok, retriever, g.held[h], args) for h in measured}
    wall = time.perf_counter() - t0
    shown = ", ".join(f"{h}{'-hop' if h != 'fine' else ' print'} {held[h]['accuracy']:.3f}" for h in measured)
    line = (
        f"{method} seed {seed}: reward {logs[0]['reward']:.2f} -> {logs[-1]['reward']:.2f}, held-out {shown} "
        f"({wall:.0f} s)"
    )
    train = {k: [lg.get(k) for lg in logs] for k in TRAIN_METRICS}
    record = {"seed": seed, "curve": [lg["reward"] for lg in logs], "held": held, "wall_s": wall, "train": train}
    return method, record, line


_WORKER: dict = {}  # a parallel job's process: its retriever, opened once


def _worker_init(threads: int) -> None:
    import os

    import torch

    # FAISS and ONNX Runtime take every core unless told, and FAISS's count is the OpenMP one torch shares
    os.environ["VIMRAG_FAISS_THREADS"] = os.environ["VIMRAG_TEXT_THREADS"] = str(threads)
    torch.set_num_threads(threads)


def _job(args, g: Gym, sft: Path, out: Path, method: str, seed: int) -> tuple[str, dict, str]:
    from retrieval.retriever import Retriever

    if "retriever" not in _WORKER:
        _WORKER["retriever"] = Retriever(g.index)
    return one_run(args, g, sft, out, method, seed, _WORKER["retriever"])


def cores() -> int:
    """CPU cores this process may run on (its affinity, where the OS reports one)."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def rl_runs(args, g: Gym, sft: Path, out: Path, methods: list[str], retriever):
    """Every (seed, method) run, as (method, record, log line) in the order they finish. With `args.jobs` above 1,
    that many worker processes share the cores, each with its share of torch threads: a tiny model's small
    matrices keep one thread busy but not two, so separate runs use the cores better than threads in one run."""
    jobs = [(seed, method) for seed in range(args.seeds) for method in methods]
    workers = min(len(jobs), args.jobs or cores())
    if workers <= 1:
        for seed, method in jobs:
            yield one_run(args, g, sft, out, method, seed, retriever)
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    threads = max(1, cores() // workers)
    print(f"RL runs: {len(jobs)} in {workers} worker processes, {threads} torch thread(s) each", flush=True)
    with ProcessPoolExecutor(
        workers, mp_context=get_context("spawn"), initializer=_worker_init, initargs=(threads,)
    ) as pool:
        futures = [pool.submit(_job, args, g, sft, out, method, seed) for seed, method in jobs]
        for f in as_completed(futures):
            yield f.result()


def run(args) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from retrieval.retriever import Retriever

    methods = [m for spec in args.methods for m in spec.split(",") if m]
    if 2 not in args.eval_hops or not set(args.eval_hops) <= {1, 2}:
        raise SystemExit(
            f"--eval-hops must include 2 (the comparison's measure) and hold only 1 and 2; got {args.eval_hops}"
        )
    if not args.rl_hops or not set(args.rl_hops) <= {1, 2}:
        raise SystemExit(f"--rl-hops must hold 1, 2 or both; got {args.rl_hops}")
    if args.copy_rounds < 1 or not 0.0 <= args.copy_recall <= 1.0:
        raise SystemExit(
            f"--copy-rounds must be at least 1 and --copy-recall in [0, 1]; got {args.copy_rounds}, {args.copy_recall}"
        )
    unknown = [m for m in methods if m not in TrainConfig.__dataclass_fields__["method"].metadata["choices"]]
    if unknown:
        raise SystemExit(f"unknown methods {unknown}; `vimrag train --help` lists them")
    refuse_unrunnable(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(args.to_dict(), indent=1))
    t_start = time.perf_counter()
    g = make_gym(args, out / "gym")
    retriever = Retriever(g.index)
    sft = warm_start(args, g, out, retriever)
    model, tok = AutoModelForCausalLM.from_pretrained(sft).eval(), AutoTokenizer.from_pretrained(sft)
    base = {h: evaluate(model, tok, retriever, envs, args) for h, envs in g.held.items()}
    fine = f", fine print (1-hop) {base['fine']['accuracy']:.3f}" if "fine" in base else ""
    print(f"SFT held-out accuracy: 1-hop {base[1]['accuracy']:.3f}, 2-hop {base[2]['accuracy']:.3f}{fine}")
    b, when = base[1], base[1]["right_when_shown"]
    print(
        f"  held-out 1-hop episodes: {b['searched']:.0%} search, {b['name_copied']:.0%} search the question's name "
        f"exactly first, {b['answer_shown']:.0%} are shown the page with the code"
        + (f", and {when:.0%} of those answer it" if when is not None else "")
    )
    for h, r in base.items():
        print(first_moves(f"held-out {h}{'-hop' if h != 'fine' else ' print'}", r))
    # RL-pool environments: training names, layouts and wordings, but no SFT trace came from them. A start that
    # does not copy fails them; passing them is not enough to read held-out names (rl/RESULTS.md, "seed by seed").
    seen = evaluate(model, tok, retriever, g.rl[:VALIDATION_ENVS], args)
    print(
        f"SFT on {min(len(g.rl), VALIDATION_ENVS)} RL-pool environments (training split, no SFT trace): "
        f"{seen['accuracy']:.3f}"
        + (
            "; below 0.5: this warm start barely copies even training names; try another --sft-seed"
            if seen["accuracy"] < 0.5
            else ""
        )
    )
    base["train"] = seen
    if not args.seeds:  # the warm start alone
        (out / "results.json").write_text(json.dumps({"base": base, "total_s": time.perf_counter() - t_start}))
        return {"base": base}
    runs: dict[str, list[dict]] = {m: [] for m in methods}
    for method, record, line in rl_runs(args, g, sft, out, methods, retriever):
        print(line, flush=True)
        runs[method].append(record)
    for rs in runs.values():  # parallel jobs finish in any order
        rs.sort(key=lambda r: r["seed"])
    from rl.experiment_report import summarize

    return summarize(runs, base, args, out, time.perf_counter() - t_start)


def main(argv: list[str] | None = None) -> int:
    from agent.config import script_main

    return script_main(ExperimentConfig, run, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
