"""Meta-Experience Learning (MEL): lessons from paired success and failure, learned beside the RL loss.

MEL (Huang et al., "Internalizing Meta-Experience into Memory for Guided Reinforcement Learning in Large Language
Models", arXiv 2602.10224) builds on RLVR: for a question whose group of rollouts holds a correct and an incorrect
trajectory, the model itself compares the two, names the bifurcation point where the reasoning went wrong, and
summarises it into a generalisable meta-experience; that lesson is internalised into the weights by minimising its
negative log-likelihood beside the RL objective. No code is published, so this follows the paper's description:

1. `contrastive_pair`: in each group with both a success and a failure (rl/ggpo.py `is_success`), one pair: the
   best-rewarded success and the worst-rewarded failure (the first of each on a tie).
2. `reflection_prompt`: the question and both trajectories' steps, numbered; the reflector answers with one JSON
   object, `{"step": N, "lesson": "..."}`: the step where they part, and a lesson of at most MAX_SENTENCES
   sentences (MAX_CHARS characters) that would have avoided the failure, stated without this question's answer.
3. `parse_reflection` validates the reply. A malformed one (no JSON object, a step outside both trajectories, an
   empty or overlong lesson, a lesson that gives away the answer) raises `MalformedReflection` with the reason;
   `reflect` logs it, records it in `mel/skipped.jsonl`, skips that pair and never stops training.
4. `lesson_target`: the lesson as an NLL target conditioned on the question (the question as the user turn, the
   lesson as the reply), and `lesson_nll` its summed token NLL. The trainer adds `mel_coef` x the token-averaged
   NLL of a mini-batch's lessons to that mini-batch's RL loss (rl/update.py): each lesson rides with its
   question's failed trajectory, so it is shuffled, split and repeated over epochs with it.

The reflector is the policy itself (`mel_reflector: policy`: in process, or through the rollout server when
`rollout: served`), or any OpenAI-compatible endpoint (`mel_reflector: URL`, `mel_reflector_model`). Lessons and
bifurcation steps go to `OUTPUT_DIR/mel/lessons.jsonl`, one line per lesson with the update, question, both
trajectories' replies, the reflector's step and the first step where the replies actually differ.

Where we depart from the paper, knowingly: one pair per group (the paper pairs every success with every failure);
no replay check of a lesson before it is kept (the paper's summary says lessons are verified by replay). Whether a
lesson helps needs a model that can reflect: the gym's tiny LM cannot (rl/RESULTS.md, "MEL").
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

logger = logging.getLogger(__name__)

MAX_SENTENCES = 4  # "a lesson of at most a few sentences"
MAX_CHARS = 600
MAX_STEP_CHARS = 400  # each step's reply as the reflector is shown it
INSTRUCTION = (
    "Two attempts at the same question follow: the first succeeded, the second failed. Find the first step where "
    "the failed attempt went wrong, and write a lesson of at most {sentences} sentences that would have avoided the "
    "mistake on any similar question (do not state this question's answer). Reply with one JSON object only: "
    '{{"step": <the step number>, "lesson": "<the lesson>"}}.'
)


class MalformedReflection(ValueError):
    """A reflector's reply that cannot be used; the message is the reason, as the log records it."""


@dataclass
class Lesson:
    """One learned lesson and where it came from (a line of mel/lessons.jsonl)."""

    update: int
    item_id: str
    question: str
    step: int  # the reflector's bifurcation step, 1-based
    lesson: str
    diverges_at: int  # the first step where the two trajectories' replies differ, 1-based
    success: list[str]  # the successful trajectory's replies
    failure: list[str]
    rewards: tuple[float, float]


def contrastive_pair(trajs) -> tuple[int, int] | None:
    """(success, failure) indices of one group: the highest-rewarded success and the lowest-rewarded failure, or
    None when the group lacks either.

    >>> class T:
    ...     def __init__(self, r): self.reward = r
    >>> contrastive_pair([T(0.0), T(1.0), T(0.2), T(1.0)]), contrastive_pair([T(1.0), T(1.0)])
    ((1, 0), None)
    """
    from rl.ggpo import is_success

    wins = [i for i, t in enumerate(trajs) if is_success(t.reward)]
    losses = [i for i, t in enumerate(trajs) if not is_success(t.reward)]
    if not wins or not losses:
        return None
    best = max(wins, key=lambda i: (trajs[i].reward, -i))
    worst = min(losses, key=lambda i: (trajs[i].reward, i))
    return best, worst


def first_divergence(a: list[str], b: list[str]) -> int:
    """The first step (1-based) where two trajectories' replies differ; one past the shorter when one is a prefix.

    >>> first_divergence(["s x", "answer 1"], ["s x", "answer 2"]), first_divergence(["a"], ["a", "b"])
    (2, 2)
    """
    for k, (x, y) in enumerate(zip(a, b), start=1):
        if x.strip() != y.strip():
            return k
    return min(len(a), len(b)) + 1


def _steps(replies: list[str]) -> str:
    return "\n".join(f"Step {k}: {' '.join(r.split())[:MAX_STEP_CHARS]}" for k, r in enumerate(replies, start=1))


def reflection_prompt(question: str, success: list[str], failure: list[str]) -> str:
    """What the reflector is shown: the instruction, the question, and each trajectory's replies by step."""
    return (
        INSTRUCTION.format(sentences=MAX_SENTENCES)
        + f"\n\nQuestion: {question}\n\nSucceeded:\n{_steps(success)}\n\nFailed:\n{_steps(failure)}\n"
    )


def parse_reflection(text: str, steps: int, answer: str = "") -> tuple[int, str]:
    """(step, lesson) from a reflector's reply, validated: the first JSON object in it, its `step` an integer in
    1..`steps` (the longer trajectory's length), its `lesson` a non-empty string of at most MAX_SENTENCES sentences
    and MAX_CHARS characters that does not contain `answer`. Raises MalformedReflection with the reason otherwise.

    >>> parse_reflection('Sure. {"step": 2, "lesson": "Search the full name before answering."}', 3)
    (2, 'Search the full name before answering.')
    >>> parse_reflection('{"step": 9, "lesson": "x"}', 3)
    Traceback (most recent call last):
    ...
    rl.mel.MalformedReflection: step 9 is not a step of the pair (1 to 3)
    """
    start = text.find("{")
    if start < 0:
        raise MalformedReflection(f"no JSON object in the reply: {text[:80]!r}")
    try:
        obj, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError as e:
        raise MalformedReflection(f"the reply's JSON does not parse ({e.msg}): {text[start : start + 80]!r}") from None
    step, lesson = obj.get("step"), obj.get("lesson")
    if isinstance(step, str) and step.strip().isdigit():
        step = int(step)
    if not isinstance(step, int) or isinstance(step, bool):
        raise MalformedReflection(f"`step` must be an integer; got {step!r}")
    if not 1 <= step <= steps:
        raise MalformedReflection(f"step {step} is not a step of the pair (1 to {steps})")
    if not isinstance(lesson, str) or not lesson.strip():
        raise MalformedReflection(f"`lesson` must be a non-empty string; got {lesson!r}")
    lesson = " ".join(lesson.split())
    if len(lesson) > MAX_CHARS:
        raise MalformedReflection(f"the lesson has {len(lesson)} characters, over {MAX_CHARS}")
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", lesson) if s]
    if len(sentences) > MAX_SENTENCES:
        raise MalformedReflection(f"the lesson has {len(sentences)} sentences, over {MAX_SENTENCES}")
    if len(answer) >= 3 and re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", lesson):
        raise MalformedReflection("the lesson states this question's answer; a lesson must carry over to others")
    return step, lesson


Reflector = Callable[[str], str]  # a prompt in, the reply's text out


class PolicyReflector:
    """A reflector over any agent policy: one reply to the prompt as a single user turn, its text only (a server's
    separate reasoning, agent.backends.base.Reasoning, and a trainable policy's Tokens are left out)."""

    def __init__(self, policy) -> None:
        self.policy = policy

    def __call__(self, prompt: str) -> str:
        from agent.backends.base import Reasoning

        chunks = self.policy.stream([{"role": "user", "content": prompt}])
        return "".join(x for x in chunks if isinstance(x, str) and not isinstance(x, Reasoning))


def make_reflector(cfg, model, proc, is_vl: bool, update: int) -> Reflector:
    """The reflector `cfg` names: `policy` (the model in process, greedy; the rollout server's current adapter under
    `rollout: served`), or an endpoint URL with `mel_reflector_model`."""
    from agent.backends.base import PolicyConfig, load_policy

    if cfg.mel_reflector == "policy" and cfg.rollout != "served":
        from rl.policy import TextPolicy, VLPolicy

        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        policy = (VLPolicy if is_vl else TextPolicy)(base, proc, max_new_tokens=cfg.mel_max_new_tokens, greedy=True)
        policy.model = model  # with its adapter, if any
        return PolicyReflector(policy)
    if cfg.mel_reflector == "policy":  # the rollout server, under the adapter of this update
        from rl.served import adapter_name

        url, name, key = cfg.rollout_url, adapter_name(update), cfg.rollout_api_key
    else:
        url, name, key = cfg.mel_reflector, cfg.mel_reflector_model, cfg.mel_api_key
    pc = PolicyConfig(backend="openai", base_url=url, api_key=key, model=name, max_new_tokens=cfg.mel_max_new_tokens)
    return PolicyReflector(load_policy(pc))


def reflect(
    groups, answers: dict[str, str], reflector: Reflector, update: int, out: Path | None, rank: int = 0
) -> dict:
    """One lesson per group that holds a success and a failure: {"lessons": {id(failed trajectory): Lesson},
    "skipped": [...]}. A malformed reply, or a reflector that fails, skips that pair with the reason logged. With
    `out`, lessons are appended to out/lessons.jsonl and skipped pairs to out/skipped.jsonl (process `rank` > 0
    writes lessons.rankN.jsonl and skipped.rankN.jsonl)."""
    lessons, skipped = {}, []
    for trajs in groups:
        pair = contrastive_pair(trajs)
        if pair is None:
            continue
        win, lose = trajs[pair[0]], trajs[pair[1]]
        good, bad = [s.output for s in win.trace.steps], [s.output for s in lose.trace.steps]
        question = win.trace.question
        try:
            reply = reflector(reflection_prompt(question, good, bad))
            step, text = parse_reflection(reply, max(len(good), len(bad)), answers.get(win.item_id, ""))
        except Exception as e:  # noqa: BLE001 - a reflection never stops training; the reason is recorded
            reason = f"{type(e).__name__}: {e}" if not isinstance(e, MalformedReflection) else str(e)
            logger.warning("MEL: update %d, question %s: pair skipped (%s)", update, win.item_id, reason)
            skipped.append({"update": update, "item_id": win.item_id, "reason": reason})
            continue
        lessons[id(lose)] = Lesson(
            update, win.item_id, question, step, text, first_divergence(good, bad), good, bad, (win.reward, lose.reward)
        )
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        tag = f".rank{rank}" if rank else ""
        with open(out / f"lessons{tag}.jsonl", "a", encoding="utf-8") as f:
            f.writelines(json.dumps(asdict(x)) + "\n" for x in lessons.values())
        with open(out / f"skipped{tag}.jsonl", "a", encoding="utf-8") as f:
            f.writelines(json.dumps(x) + "\n" for x in skipped)
    return {"lessons": lessons, "skipped": skipped}


@dataclass
class LessonTarget:
    """A lesson as an NLL target: the question's prompt as context, the lesson's tokens (and the stop) as target."""

    inputs: dict[str, torch.Tensor]  # input_ids (1, P), attention_mask (1, P)
    gen_ids: torch.Tensor  # (N,)


def lesson_target(policy, question: str, lesson: str) -> LessonTarget:
    """The target for `lesson`, conditioned on `question` as the policy encodes a user turn (its chat template)."""
    inputs = {k: v.cpu() for k, v in policy.encode([{"role": "user", "content": question}]).items()}
    ids = policy.tokenizer(lesson, add_special_tokens=False)["input_ids"] + [policy.stop_ids[0]]
    return LessonTarget(inputs, torch.tensor(ids, dtype=torch.long))


def lesson_nll(model, target: LessonTarget) -> torch.Tensor:
    """The summed negative log-likelihood (a scalar, with grad) of the lesson's tokens after its question."""
    from rl.policy import sequence_logprobs

    return -sequence_logprobs(model, target.inputs, target.gen_ids, 1.0).sum()


def lesson_targets(trainer, groups) -> tuple[dict[int, LessonTarget], dict[str, float]]:
    """MEL's share of one update for `trainer` (rl/trainer.py): reflect on this process's groups and turn each lesson
    into a target. Returns ({id(failed trajectory): LessonTarget}, counts to log: pairs, lessons, skipped)."""
    from rl.policy import make_policy

    cfg, acc = trainer.cfg, trainer.acc
    model = acc.unwrap_model(trainer.model)
    answers = {it.id: (it.answers[0] if it.answers else "") for it in trainer.ds.items}
    reflector = make_reflector(cfg, model, trainer.proc, trainer.is_vl, trainer.update)
    got = reflect(groups, answers, reflector, trainer.update, trainer.out / "mel", acc.process_index)
    policy = make_policy(model, trainer.proc, trainer.is_vl, cfg)
    targets = {k: lesson_target(policy, x.question, x.lesson) for k, x in got["lessons"].items()}
    n = len(got["lessons"]) + len(got["skipped"])
    return targets, {"mel_pairs": n, "mel_lessons": len(got["lessons"]), "mel_skipped": len(got["skipped"])}
