"""SFT cold start: fine-tune a policy on saved agent traces, with the loss on the action tokens only.

    vimrag sft --traces runs/eval/RUN --model Qwen/Qwen2.5-VL-7B-Instruct --output-dir runs/sft/x
    vimrag sft --traces 'runs/eval/*/traces' --min-score 1 --model ./tiny --epochs 3
    vimrag sft --traces runs/synth/teacher/acc.jsonl --model ./tiny   # compiled ACC examples (rl/synth/trajectories.py)

Every step of a trace whose reply parsed into an action becomes one example: the exact context the
model saw (its messages, images re-rendered from the trace's evidence at the recorded size) as the
prompt, and the reply it gave as the target. Only the target tokens carry loss; the prompt, with every
observation in it, is context. `--min-score` keeps traces whose prediction row (a `vimrag eval` run's
predictions.jsonl) scored at least that much, so a stronger model's good runs teach a weaker one.
The papers start RL this way (VRAG-RL arXiv 2505.22019 section 3; VimRAG arXiv 2602.12735).
"""

from __future__ import annotations

import glob
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rl.config import SFTConfig


@dataclass
class Example:
    messages: list[dict[str, Any]]  # as the model saw them; image parts rebuilt from evidence
    target: str  # the reply to learn
    source: str = ""  # trace file and step, for errors


def _trace_files(spec: str) -> list[Path]:
    paths = [Path(p) for p in sorted(glob.glob(spec))] or [Path(spec)]
    out = []
    for p in paths:
        if p.is_dir():
            out += sorted((p / "traces").glob("*.json")) if (p / "traces").is_dir() else sorted(p.glob("*.json"))
        elif p.is_file():
            out.append(p)
    if not out:
        raise FileNotFoundError(
            f"no traces at {spec}; give a `vimrag eval` run folder, its traces/ folder, trace JSON files or a glob"
        )
    return out


def _scores(trace_file: Path) -> dict[str, float]:
    pred = trace_file.parent.parent / "predictions.jsonl"
    if not pred.exists():
        return {}
    rows = [json.loads(x) for x in pred.read_text().splitlines() if x.strip()]
    return {Path(r["trace"]).name: r["score"] for r in rows if r.get("trace")}


def load_acc(path: Path, with_images: bool = True) -> list[Example]:
    """Examples from a compiled ACC file (`vimrag synth trajectories --compile acc`): one per line, its messages
    (pictures re-rendered from the trace it names) and its target."""
    from agent.events import Trace
    from agent.evidence import EvidenceStore

    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        where = f"{path.name} line {n}"
        store = None
        if with_images:
            trace_file = Path(row["trace"])
            if not trace_file.is_absolute() and not trace_file.exists():
                trace_file = path.parent / trace_file
            store = EvidenceStore.from_dict(Trace.from_dict(json.loads(trace_file.read_text())).evidence)
        msgs = [_rebuild(m, store, where) for m in row["messages"]]
        out.append(Example(msgs, row["target"], where))
    return out


def load_examples(spec: str, min_score: float | None = None, with_images: bool = True) -> list[Example]:
    """Examples from every parsed step of the selected traces, or from a compiled ACC file (*.jsonl)."""
    from agent.events import Trace
    from agent.evidence import EvidenceStore

    if spec.endswith(".jsonl") and Path(spec).is_file():
        return load_acc(Path(spec), with_images)
    out = []
    score_cache: dict[Path, dict[str, float]] = {}
    for f in _trace_files(spec):
        if min_score is not None:
            scores = score_cache.setdefault(f.parent, _scores(f))
            if scores.get(f.name, -1.0) < min_score:
                continue
        trace = Trace.from_dict(json.loads(f.read_text()))
        store = EvidenceStore.from_dict(trace.evidence) if with_images else None
        for rec in trace.steps:
            if rec.action is None or not rec.output.strip():
                continue  # a malformed reply is nothing to imitate
            msgs = [_rebuild(m, store, f"{f.name} step {rec.step}") for m in rec.messages]
            out.append(Example(msgs, rec.output, f"{f.name} step {rec.step}"))
    return out


def _rebuild(message: dict, store, where: str) -> dict:
    content = message.get("content", "")
    if isinstance(content, str):
        return {"role": message["role"], "content": content}
    parts = []
    for p in content:
        if p.get("type") != "image":
            parts.append(p)
        elif store is None:
            parts.append({"type": "text", "text": f"[{p.get('ref', 'image')}]"})
        else:
            imgs = store.images_for(p.get("ref", ""))
            if not imgs:
                raise FileNotFoundError(
                    f"{where}: cannot re-render {p.get('ref')} (its source file moved?); "
                    "train text-only with --no-images or restore the corpus"
                )
            img = imgs[0][0].convert("RGB").resize((int(p["width"]), int(p["height"])))
            parts.append({"type": "image", "image": img, "ref": p.get("ref", "")})
    return {"role": message["role"], "content": parts}


def example_loss(policy, model, ex: Example) -> tuple[torch.Tensor, int]:
    """Mean negative log-likelihood of the target tokens (end of turn included) after the prompt."""
    from rl.policy import sequence_logprobs

    inputs = policy.encode(ex.messages)
    target = target_ids(policy.tokenizer, ex.target)  # (N,)
    logp = sequence_logprobs(model, inputs, target)  # (N,)
    return -logp.mean(), int(target.numel())


def length_grouped(order: list[int], lengths: list[int], size: int, rng, mult: int = 50) -> list[list[int]]:
    """Batches of `size` from the shuffled `order` with little padding: each run of `size * mult` examples is sorted by
    length and cut into batches, and the batches are shuffled, so an epoch still sees every example once in a random
    mix (the megabatch scheme of transformers' `get_length_grouped_indices`, `trainer_pt_utils.py`, megabatch_mult
    50).

    >>> import random
    >>> b = length_grouped(list(range(8)), [5, 1, 7, 3, 8, 2, 6, 4], 2, random.Random(0), mult=4)
    >>> sorted(sorted(x) for x in b)   # lengths 8 7 | 6 5 | 4 3 | 2 1 paired
    [[0, 6], [1, 5], [2, 4], [3, 7]]
    """
    batches = []
    for m in range(0, len(order), size * mult):
        run = sorted(order[m : m + size * mult], key=lambda i: -lengths[i])
        batches += [run[b : b + size] for b in range(0, len(run), size)]
    rng.shuffle(batches)
    return batches


def batch_loss(policy, model, batch: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Mean over examples of each one's mean target NLL, as `example_loss` gives one by one, in one padded
    forward pass. `batch` holds (prompt ids (P,), target ids (N,)) pairs of a text-only model (`encode_text`)."""
    device = next(model.parameters()).device
    seqs = [torch.cat([p, t]) for p, t in batch]
    width = max(len(s) for s in seqs)
    pad = policy.tokenizer.pad_token_id if policy.tokenizer.pad_token_id is not None else policy.stop_ids[0]
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)  # (B, W)
    att = torch.zeros(len(seqs), width, dtype=torch.long)  # (B, W)
    tgt = torch.zeros(len(seqs), width, dtype=torch.bool)  # (B, W) positions whose token is a target
    for i, ((p, _), s) in enumerate(zip(batch, seqs)):
        ids[i, : len(s)], att[i, : len(s)], tgt[i, len(p) : len(s)] = s, 1, True
    ids, att, tgt = ids.to(device), att.to(device), tgt.to(device)
    logits = model(input_ids=ids, attention_mask=att).logits[:, :-1].float()  # (B, W-1, V): t predicts t+1
    logp = torch.log_softmax(logits, dim=-1).gather(2, ids[:, 1:, None]).squeeze(2)  # (B, W-1)
    on = tgt[:, 1:].float()  # (B, W-1)
    return (-(logp * on).sum(1) / on.sum(1).clamp(min=1.0)).mean()  # ()


def target_ids(tok, target: str) -> torch.Tensor:
    """(N,) the reply's token ids with the end of turn the model must learn to emit."""
    end = "<|im_end|>" if tok.convert_tokens_to_ids("<|im_end|>") not in (None, tok.unk_token_id) else tok.eos_token
    return torch.tensor(tok(target + end, add_special_tokens=False)["input_ids"])


def encode_text(policy, ex: Example) -> tuple[torch.Tensor, torch.Tensor]:
    """(prompt ids (P,), target ids (N,)) of a text-only example."""
    return policy.encode(ex.messages)["input_ids"][0], target_ids(policy.tokenizer, ex.target)


def lr_factor(step: int, total: int, warmup: float = 0.0, schedule: str = "constant") -> float:
    """The learning rate's multiplier at optimizer step `step` of `total`: a linear warm-up over the first
    `warmup` share, then constant, or a linear decay to 5%.

    >>> [round(lr_factor(s, 100, 0.1, "linear"), 3) for s in (0, 9, 10, 55, 99)]
    [0.1, 1.0, 1.0, 0.5, 0.05]
    >>> lr_factor(50, 100)
    1.0
    """
    n_warm = int(total * warmup)
    if step < n_warm:
        return (step + 1) / n_warm
    if schedule == "linear":
        return max(0.05, 1.0 - (step - n_warm) / max(1, total - n_warm))
    return 1.0


def train_sft(
    sft: SFTConfig, progress: bool = True, examples: list[Example] | None = None, model=None, proc=None
) -> dict[str, Any]:
    """Fine-tune on trace steps (or on `examples`, when given); saves the model, its processor or tokenizer,
    and the resolved sft_config.json to `sft.output_dir`."""
    from accelerate import Accelerator
    from tqdm.auto import tqdm

    from rl.trainer import TrainConfig, load_model, make_policy

    acc = Accelerator(gradient_accumulation_steps=sft.grad_accum, mixed_precision=sft.mixed_precision)
    rng = random.Random(sft.seed)
    torch.manual_seed(sft.seed)
    cfg = TrainConfig(model=sft.model, dataset="-")
    if model is None:
        model, proc, is_vl = load_model(cfg)
    else:
        is_vl = hasattr(model.config, "vision_config")
    exs = examples if examples is not None else load_examples(sft.traces, sft.min_score, sft.images and is_vl)
    if sft.max_examples:
        exs = exs[: sft.max_examples]
    if not exs:
        raise ValueError(f"no training examples in {sft.traces} (min_score={sft.min_score}); check the traces")
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=sft.lr)
    size = 1 if is_vl else sft.batch_size
    per_epoch = -(-len(exs[acc.process_index :: acc.num_processes]) // size)  # batches, rounded up
    steps = max(1, sft.epochs * per_epoch // sft.grad_accum)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, steps, sft.warmup, sft.schedule))
    model, opt = acc.prepare(model, opt)  # the schedule counts this process's optimizer steps itself
    policy = make_policy(acc.unwrap_model(model), proc, is_vl, cfg)
    encoded = [encode_text(policy, ex) for ex in exs] if size > 1 else None  # tokenized once, not every epoch
    history = []
    total = sft.epochs * len(exs)
    bar = tqdm(total=total, desc="sft", disable=not (progress and acc.is_main_process))
    model.train()
    for epoch in range(sft.epochs):
        order = list(range(len(exs)))
        rng.shuffle(order)
        mine = order[acc.process_index :: acc.num_processes]
        run_loss, n = 0.0, 0
        if encoded is not None and sft.group_by_length:
            batches = length_grouped(mine, [len(p) + len(t) for p, t in encoded], size, rng)
        else:
            batches = [mine[b : b + size] for b in range(0, len(mine), size)]
        for chunk in batches:
            with acc.accumulate(model):
                if encoded is None:
                    loss, _ = example_loss(policy, model, exs[chunk[0]])
                else:
                    loss = batch_loss(policy, model, [encoded[i] for i in chunk])
                acc.backward(loss)
                if acc.sync_gradients and sft.max_grad_norm:
                    acc.clip_grad_norm_(model.parameters(), sft.max_grad_norm)
                opt.step()
                if acc.sync_gradients:
                    sched.step()
                opt.zero_grad()
            run_loss += float(loss.detach())
            n += 1
            bar.update(len(chunk) * acc.num_processes)
            bar.set_postfix(loss=f"{run_loss / n:.3f}")
        history.append({"epoch": epoch + 1, "loss": run_loss / max(1, n)})
    bar.close()
    acc.wait_for_everyone()
    out = Path(sft.output_dir)
    if acc.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        acc.unwrap_model(model).save_pretrained(out)
        proc.save_pretrained(out)
        (out / "sft_history.json").write_text(json.dumps({"examples": len(exs), "history": history}))
        (out / "sft_config.json").write_text(json.dumps(sft.to_dict(), indent=1))
    return {"examples": len(exs), "history": history, "output_dir": str(out)}
