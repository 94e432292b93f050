"""`AgentConfig`: how the agent works (its protocol, step limit, search depth and the visual memory's budgets).

It sits above the protocol registry (agent/protocols/), whose names and prompts it checks, so that the
episode state (agent/state.py) and the parser below the registry never import it back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from agent.config import Config, setting
from agent.tools import OBS_MAX_PIXELS
from memory_graph.energy import GAMMA, LAMBDA, MAX_FRAME_PIXELS, MAX_IMAGE_PIXELS, S_TOTAL, TOP_K

TOP_K_PIXELS = 3  # results per search for a policy that reads pixels: each is a page image in its context
# For one that reads text (the embedded reader): on the MMLongBench-Doc dev set, 5 against 3 gave 26.9% against
# 26.3% accuracy and 29.9% against 28.6% answered precision (eval/RESULTS.md, "Five results a search").
TOP_K_TEXT = 5


def default_top_k(reads_pixels: bool) -> int:
    """Results per search when `top_k` is unset: fewer for a policy that sees each result as an image."""
    return TOP_K_PIXELS if reads_pixels else TOP_K_TEXT


def _protocols() -> tuple[str, ...]:
    from agent.protocols import names

    return names()


def _search_modes() -> tuple[str, ...]:
    from retrieval.retriever import MODES

    return MODES


@dataclass
class AgentConfig(Config):
    """How the agent works: its protocol, step limit, search depth and the visual memory's budgets."""

    config_name = "agent"

    protocol: str = setting(
        "vimrag", "the protocol (agent/protocols/): its tools, context layout and prompts", choices=_protocols
    )
    max_steps: int | None = setting(None, "model calls before the episode is stopped; default: the protocol's own")
    top_k: int | None = setting(
        None, "results shown per search (vimrag, react); default: 3, or 5 for the embedded reader, which reads text"
    )
    vanilla_k: int = setting(5, "pages put in context by the vanilla baseline")
    s_total: int = setting(S_TOTAL, "pixel budget of the whole visual context (vimrag)", aliases=["budget"])
    memory_k: int = setting(TOP_K, "memorized items that keep pixels (top-K by energy)")
    max_image_pixels: int = setting(
        MAX_IMAGE_PIXELS, "cap per picture as encoded (the VimRAG demo's max_pixels_image), results and memory alike"
    )
    max_frame_pixels: int = setting(
        MAX_FRAME_PIXELS, "cap per video frame as encoded (the VimRAG demo's max_pixels_video)"
    )
    obs_pixels: int = setting(OBS_MAX_PIXELS, "pixels per freshly retrieved image")
    lam: float = setting(LAMBDA, "energy time decay")
    gamma: float = setting(GAMMA, "energy back-propagation weight")
    search_mode: str = setting(
        "hybrid", "how searches rank: hybrid (BM25 + dense, fused), bm25 or dense", choices=_search_modes
    )
    docs: list[str] | None = setting(
        None, "search only these documents (file name or path; repeatable)", aliases=["doc"]
    )
    prompts: dict[str, str] = setting(
        factory=dict,
        help="the protocol's prompts replaced by name, a mapping (vimrag: system, user, summary; vrag: user, "
        "system, nudge, invalid); on the command line YAML, e.g. '{system: ...}', or see --prompt-file",
    )
    demo_jpeg: bool = setting(True, "vimrag: send pictures as the VimRAG demo does, JPEG quality 75 under 38,000 bytes")
    read_pictures: str = setting(
        "",
        "a text-only policy is also given the text this OCR engine (tesseract, rapidocr or auto) reads in each picture "
        "at the size it is shown, so small print is read only where a crop makes it legible; empty: off. Every "
        "protocol but vimrag; the RL gym's picture environments use it",
        choices=("", "auto", "rapidocr", "tesseract"),
    )
    vrag_pad: int = setting(
        28,
        "vrag: pixels a <bbox> grows by on each side, in the model's coordinates, before it is mapped to the "
        "original (VRAG-RL pads 28 in its validation branch and the demo; 0 reproduces its training rollouts)",
    )

    fold_budget: int = setting(
        16384,
        "fold: fold the history into memory once the context passes this many tokens, text and pictures (0: only "
        "when the model writes <fold_thought>, as DeepAgent)",
    )
    parallel_calls: bool = setting(
        True,
        "react: a reply's several searches run at once (false: one after another); protocols that take one call "
        "per turn, as published, are not affected",
    )
    tool_latency: str = setting(
        "",
        "tests and benchmarks: delay search, crop and judge calls, e.g. heavy:0.2 (lognormal, median 0.2 s) or "
        "search=fixed:0.5,crop=jitter:0.05 (agent/latency.py)",
    )

    def for_policy(self, policy: Any) -> "AgentConfig":
        """This config with what it leaves to the policy filled in: results per search, by what the policy reads
        (`default_top_k`). The agent runs on it, and `vimrag eval` records it."""
        if self.top_k is not None:
            return self
        return replace(self, top_k=default_top_k(getattr(policy, "is_vlm", True)))

    def __post_init__(self) -> None:
        from agent.latency import parse_latency
        from agent.protocols import check_prompts, get

        parse_latency(self.tool_latency)  # ValueError naming the bad part

        proto = get(self.protocol)  # ValueError naming the protocols
        if self.max_steps is None:
            self.max_steps = proto.max_steps
        self.prompts = check_prompts(self.protocol, dict(self.prompts or {}))
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.top_k is not None and self.top_k < 1 or self.vanilla_k < 1:
            raise ValueError("top_k and vanilla_k must be >= 1")
        if self.read_pictures and self.protocol == "vimrag":
            raise ValueError(
                "read_pictures is for text-only policies, and vimrag's memory re-encodes its pictures every step; "
                "use it with vrag, react or another protocol, or leave it empty"
            )

    def memory_budget(self) -> dict[str, int | float]:
        """The visual memory's knobs as `memory_graph.energy.allocate` (and `memory_plan`) take them."""
        return {
            "k": self.memory_k,
            "s_total": self.s_total,
            "lam": self.lam,
            "gamma": self.gamma,
        }
