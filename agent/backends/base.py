"""The one policy interface every backend implements, and the config that picks a backend.

Messages are OpenAI-style chat messages whose content is a string or a list of parts. Inside the agent an
image part carries the PIL image itself, already resized to its allocated pixel budget:

    {"role": "user", "content": [{"type": "text", "text": "..."},
                                 {"type": "image", "image": <PIL.Image>, "ref": "Picture 1"}]}

Backends translate that form to what their model wants (the OpenAI backend to base64 data URLs, the
transformers backend to its processor's inputs). A backend streams text chunks; `generate` joins them. A
backend that sees tokens may end its stream with one `Tokens`: the reply's token ids, their log-probs and the
model inputs, which the loop puts on the step's done `ModelOutput` event (that is where rl reads them).
The optional `view` is the agent's structured state (graph, evidence, last results); model backends
ignore it, the embedded controller and the scripted test policy read it.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass
from typing import Any, Iterator

from agent.config import Config, setting


class Reasoning(str):
    """A streamed piece of reasoning that a server returns apart from the reply (`reasoning_content`). The
    loop keeps it in the trace and the UI, never in the reply the protocol parses or sends back."""


@dataclass
class Tokens:
    """The tokens behind a streamed reply, from a backend that has them (yielded after the text)."""

    token_ids: list[int]  # (N,) the reply as generated, end-of-turn token included
    logprobs: list[float] | None = None  # (N,) their log-probs under the distribution they were drawn from
    model_inputs: dict[str, Any] | None = None  # the prompt's model tensors (input_ids (1, P), pixels, grid)
    entropies: list[float] | None = None  # (N,) that distribution's entropy at each token, in nats (rl's methods)


class PolicyError(RuntimeError):
    """A backend could not produce an answer (unreachable endpoint, bad model path...). Says how to fix it."""


@dataclass
class PolicyConfig(Config):
    """Which model answers, and how it is called. The backend is picked by name from `BACKENDS`."""

    config_name = "policy"

    backend: str = setting(
        "embedded",
        "embedded: the offline default (a controller reading text and OCR, no VLM); openai: any "
        "OpenAI-compatible endpoint (vLLM, SGLang, DashScope, OpenAI); transformers: a local Qwen2.5-VL / "
        "Qwen3-VL; scripted: replays a script (tests)",
        choices=lambda: tuple(BACKENDS),
    )
    model: str = setting(
        "",
        "model name (openai; empty: the first one served), HF id or local path (transformers), "
        "'keyword' (embedded without SmolLM2), script JSON (scripted)",
    )
    base_url: str = setting("http://127.0.0.1:8000/v1", "OpenAI-compatible endpoint")
    api_key: str = setting("", "API key; defaults to $OPENAI_API_KEY, else 'EMPTY'", secret=True)
    timeout_s: float = setting(120.0, "per-request timeout of endpoint calls (s)", aliases=["timeout"])
    retries: int = setting(2, "retries on connection errors / 5xx / 429")
    temperature: float | None = setting(
        None, "sampling temperature, 0 = greedy; default: the protocol's (vimrag: 0.6 thinking, 0 without; others 0)"
    )
    top_p: float | None = setting(
        None, "nucleus sampling; default: the protocol's (vimrag thinking: 0.95; others: unset)"
    )
    max_new_tokens: int | None = setting(
        None, "cap on generated tokens per step; default: the protocol's (vimrag 4096, as the demo; others 1024)"
    )
    thinking: bool | None = setting(
        None,
        "thinking mode, sent as chat_template_kwargs.enable_thinking (openai) or to the chat template "
        "(transformers); default: the protocol's (vimrag on, as the demo; others not sent)",
    )
    device: str = setting("auto", "transformers backend: auto | cpu | cuda[:n]")
    dtype: str = setting("auto", "transformers backend: auto | bfloat16 | float32")
    max_pixels: int = setting(1_003_520, "upper bound on any one image's pixels")
    seed: int = setting(0, "sampling seed (an eval run also seeds random, numpy, torch)")
    coords: str = setting(
        "auto",
        "how the model writes boxes: auto (from the model: Qwen3-VL relative 0-1000, else absolute "
        "pixels), absolute or relative",
        choices=("auto", "absolute", "relative"),
    )
    min_confidence: float = setting(
        0.17,
        "embedded: the least confidence (0-1) at which its reader answers; below it, it answers 'Not answerable', "
        "says what it could not do and points to the pages most likely to hold the answer (0 answers always; "
        "0.17 keeps every bundled plain and demo answer: eval/RESULTS.md)",
    )
    tool_calling: str = setting(
        "text",
        "openai: text (tool calls written in the reply, as the VimRAG demo reads them), native (send "
        "`tools`, read `tool_calls`) or auto (native, falling back to text if the server refuses tools)",
        choices=("text", "native", "auto"),
    )


def generation_settings(protocol: Any, config: Any) -> dict[str, Any]:
    """The sampling settings of a model call: the protocol's defaults (`Protocol.generation_defaults`, which follow
    the published code) overridden by whatever the user set in `config` (a PolicyConfig). `protocol` None: the
    protocol-neutral defaults. Keys: max_new_tokens, temperature, and top_p / thinking when they are to be sent.

    >>> generation_settings(None, PolicyConfig(temperature=0.3))
    {'max_new_tokens': 1024, 'temperature': 0.3}
    """
    thinking = getattr(config, "thinking", None)
    out = dict(protocol.generation_defaults(thinking) if protocol is not None else DEFAULT_GENERATION)
    if thinking is not None:
        out["thinking"] = thinking
    for key in ("max_new_tokens", "temperature", "top_p"):
        if getattr(config, key, None) is not None:
            out[key] = getattr(config, key)
    return out


DEFAULT_GENERATION = {"max_new_tokens": 1024, "temperature": 0.0}  # every protocol's but vimrag's


class Policy:
    """Base class: subclasses implement `stream`; `generate` joins the stream."""

    name: str = "policy"
    patch: int = 28  # the vision patch grid images are snapped to (Qwen2.5-VL 28, Qwen3-VL 32)
    is_vlm: bool = True  # whether it reads pixels (the embedded controller reads text and OCR boxes)
    coords: str = "absolute"  # how it writes boxes (agent/coords.py)
    native_tools: bool = False  # tools travel in the API's `tools` field, so prompts need not list them

    def describe(self) -> str:
        """One line for the UI and traces: which model, where."""
        return self.name

    def stream(self, messages: list[dict], view: Any = None) -> Iterator[str | Tokens]:
        raise NotImplementedError

    def generation(self, protocol: Any) -> dict[str, Any]:
        """The sampling settings this policy uses under `protocol`, as the trace and config.json record them
        (the loop hands them back as `view.generation`); empty for a policy that does not sample."""
        return {}

    def generate(self, messages: list[dict], view: Any = None) -> str:
        return "".join(c for c in self.stream(messages, view) if isinstance(c, str))

    def close(self) -> None:
        """Free resources (HTTP clients, GPU memory). Safe to call twice."""


# backend name -> "module:factory"; modules are imported lazily so heavy dependencies load only when used
BACKENDS = {
    "embedded": "agent.backends.embedded:EmbeddedPolicy",
    "openai": "agent.backends.openai_compat:OpenAIPolicy",
    "transformers": "agent.backends.transformers_vl:TransformersPolicy",
    "scripted": "agent.backends.scripted:ScriptedPolicy",
}


def load_policy(config: PolicyConfig | dict | str | None = None, **overrides) -> Policy:
    """Build the configured backend. `config` may be a PolicyConfig, a dict, or just the backend name."""
    if config is None:
        config = PolicyConfig()
    elif isinstance(config, str):
        config = PolicyConfig(backend=config)
    elif isinstance(config, dict):
        config = PolicyConfig.from_dict(config)
    if overrides:
        config = PolicyConfig.from_dict({**asdict(config), **overrides})
    target = BACKENDS.get(config.backend)
    if target is None:
        raise PolicyError(f"unknown backend {config.backend!r}; choose one of {sorted(BACKENDS)}")
    module, factory = target.split(":")
    return getattr(importlib.import_module(module), factory)(config)
