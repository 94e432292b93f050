r"""`vimrag synth`: training data from your own corpus.

    vimrag synth questions --corpus my_pdfs/ --n 300 --out runs/synth/q       verified questions (offline rules)
    vimrag synth questions --index IDX --generator-url http://127.0.0.1:8000/v1 --out runs/synth/q
    vimrag synth difficulty --questions runs/synth/q --k 4 --backend openai --base-url URL
    vimrag synth trajectories --questions runs/synth/q --out runs/synth/t --backend openai --base-url URL \\
        --protocol vimrag --compile acc

Each reruns where it stopped: give the same --out (or --questions) again.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from agent.backends.base import PolicyConfig
from agent.config import Config, add_command, from_args, setting
from agent.settings import AgentConfig
from eval.runner import JudgeConfig


@dataclass
class TrajectoriesConfig(Config):
    """A teacher over synthesized questions: which model, which protocol, what is kept."""

    config_name = "trajectories"

    questions: str = setting("", "a `vimrag synth questions` folder, or its questions.jsonl")
    out: str = setting("runs/synth/trajectories", "output folder (rerun with the same one to resume)")
    index: str = setting("", "index the questions were made from (default: the one their config.json names)")
    concurrency: int = setting(1, "questions in flight (endpoint backends)")
    min_score: float = setting(1.0, "keep trajectories scored at least this (the judge's verdict when one is set)")
    compile: str = setting("", "also compile each kept trajectory: acc (question + every observation, no tools)")
    policy: PolicyConfig = setting(factory=PolicyConfig, help="the teacher model")
    agent: AgentConfig = setting(factory=AgentConfig, help="the agent and its protocol")
    judge: JudgeConfig = setting(factory=JudgeConfig, help="LLM judge (optional)", flag_prefix="judge-")

    def __post_init__(self) -> None:
        if not self.questions:
            raise ValueError("give --questions: a `vimrag synth questions` folder")
        if self.compile not in ("", "acc"):
            raise ValueError(f"unknown --compile {self.compile!r}; the one compiler is acc")


@dataclass
class DifficultyConfig(Config):
    """A reference agent's pass rate per item over k samples."""

    config_name = "difficulty"

    questions: str = setting("", "a `vimrag synth questions` folder, or its questions.jsonl")
    k: int = setting(4, "samples per item (seeds seed .. seed+k-1)")
    index: str = setting("", "index the questions were made from (default: the one their config.json names)")
    concurrency: int = setting(1, "questions in flight (endpoint backends)")
    policy: PolicyConfig = setting(factory=PolicyConfig, help="the reference model")
    agent: AgentConfig = setting(factory=AgentConfig, help="the agent and its protocol")

    def __post_init__(self) -> None:
        if not self.questions:
            raise ValueError("give --questions: a `vimrag synth questions` folder")


def add_parser(sub) -> None:
    from rl.synth.questions import SynthConfig

    ps = sub.add_parser(
        "synth",
        help="training data from your corpus: verified questions, difficulty, teacher trajectories, ACC",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s2 = ps.add_subparsers(dest="synth_command", required=True)
    add_command(s2, "questions", SynthConfig, cmd_questions, "verified questions from an index or a corpus")
    add_command(s2, "difficulty", DifficultyConfig, cmd_difficulty, "a reference agent's pass rate per item")
    add_command(s2, "trajectories", TrajectoriesConfig, cmd_trajectories, "a teacher's right trajectories as SFT data")


def cmd_questions(args: argparse.Namespace) -> int:
    """Sample pages, page pairs and clips from an index (or a corpus, indexed first), write one question each, and
    keep those that pass every check: grounded, needs the evidence, unambiguous, not a near-duplicate. Offline
    rules write and check without a model; --generator-url / --verifier-url use OpenAI-compatible endpoints."""
    from rl.synth.questions import SynthConfig, synth_questions

    card = synth_questions(from_args(SynthConfig, args), progress=not args.quiet)
    print(json.dumps({k: card[k] for k in ("kept", "rejected", "by_type", "rejected_by_check")}))
    return 0


def cmd_difficulty(args: argparse.Namespace) -> int:
    """Run a reference agent k times over the questions and store each item's pass rate (0 < pass < 1 is the
    learnable set a curriculum picks from)."""
    from rl.synth.trajectories import synth_difficulty

    cfg = from_args(DifficultyConfig, args)
    res = synth_difficulty(
        cfg.questions, cfg.k, cfg.policy, cfg.agent, cfg.index or None, cfg.concurrency, not args.quiet
    )
    print(json.dumps(res))
    return 0


def cmd_trajectories(args: argparse.Namespace) -> int:
    """Run a teacher over the questions, keep the trajectories judged right (and, for vimrag, without a dead-end
    search), write them as `vimrag sft` input, and with --compile acc as tool-free long-context examples."""
    from rl.synth.trajectories import synth_trajectories

    cfg = from_args(TrajectoriesConfig, args)
    res = synth_trajectories(
        cfg.questions,
        cfg.out,
        cfg.policy,
        cfg.agent,
        cfg.index or None,
        cfg.concurrency,
        cfg.min_score,
        cfg.compile,
        cfg.judge,
        not args.quiet,
    )
    print(json.dumps(res))
    return 0
