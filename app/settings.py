"""The web demo's settings: one typed config, `DemoConfig`, from the command line to each session.

`vimrag demo`'s flags are generated from it (agent/config.py). Each browser session holds its own copy in a
`gr.State`, starting from the command line's; the Settings form replaces its `policy` and `agent` through
`apply_form`, which checks the values and says what to fix. Loaded models, and the lock that lets a local
model answer one question at a time, belong to the `Workspace` (app/workspace.py), which all sessions share.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from agent.backends.base import PolicyConfig
from agent.config import Config, setting
from agent.settings import AgentConfig, default_top_k
from app.workspace import Workspace

# the backends the Settings form offers, by their label there
BACKEND_LABELS = {
    "embedded (offline default)": "embedded",
    "OpenAI-compatible endpoint": "openai",
    "local transformers model": "transformers",
}


@dataclass
class DemoConfig(Config):
    """The demo server (where its files live, where it listens) and the policy and agent that answer."""

    config_name = "demo"

    workdir: str = setting(
        factory=lambda: os.environ.get("VIMRAG_DEMO_DIR", "vimrag-demo"),
        help="index, uploads and run outputs ($VIMRAG_DEMO_DIR)",
    )
    corpus: str | None = setting(None, "the bundled corpus folder, indexed at start (default: assets/corpus)")
    bundled: bool = setting(True, "index the bundled corpus at start (new or changed files)")
    host: str = setting("127.0.0.1", "bind address (127.0.0.1: this machine only)")
    port: int = setting(7860, "the port to serve on")
    concurrency: int = setting(2, "questions answered at once (others queue)")
    max_upload_mb: int = setting(Workspace.max_upload_mb, "largest upload accepted (MB)")
    keep_runs: int = setting(Workspace.keep_runs, "answered questions kept under WORKDIR/runs (oldest go first)")
    warmup: bool = setting(True, "load the model and the index before serving")
    search_url: str = setting(
        "",
        "search through this server (`vimrag serve-search`'s or VRAG's) instead of WORKDIR/index; "
        "uploads are then refused",
    )
    policy: PolicyConfig = setting(factory=PolicyConfig, help="the model that answers")
    agent: AgentConfig = setting(factory=AgentConfig, help="the agent")


def default_settings(backend: str | None = None, **policy: Any) -> DemoConfig:
    """The demo's config with these policy settings and everything else at its default (scripts, tests)."""
    if backend is not None:
        policy["backend"] = backend
    return DemoConfig(policy=PolicyConfig.from_dict(policy))


def describe_backend(cfg: DemoConfig) -> str:
    """The one-line summary above the chat."""
    p, a = cfg.policy, cfg.agent
    if p.backend == "embedded":
        what = "embedded offline default (SmolLM2-135M + deterministic controller)"
    elif p.backend == "openai":
        what = f"OpenAI-compatible endpoint `{p.base_url}`, model `{p.model or '(first served)'}`"
    else:
        what = f"{p.backend} model `{p.model}`"
    return (
        f"**Backend:** {what} · **protocol:** {a.protocol} · max {a.max_steps} steps · "
        f"top-k {a.top_k or default_top_k(p.backend != 'embedded')} · budget {a.s_total:,} px"
    )


def apply_form(
    cfg: DemoConfig,
    backend_label: str,
    base_url: str,
    model: str,
    api_key: str,
    model_path: str,
    protocol: str,
    max_steps: float,
    s_total: float,
    top_k: float,
) -> DemoConfig:
    """`cfg` with the Settings form's values; a ValueError saying what to fix when one is wrong. Policy
    settings the form does not show (temperature, timeouts...) keep their command-line values."""
    backend = BACKEND_LABELS.get(backend_label, backend_label)
    policy = replace(cfg.policy, backend=backend, model="")
    if backend == "openai":
        if not (base_url or "").strip().startswith(("http://", "https://")):
            raise ValueError(
                f"the endpoint URL {base_url!r} must start with http:// or https:// (e.g. {PolicyConfig.base_url})"
            )
        policy = replace(policy, base_url=base_url.strip(), model=(model or "").strip(), api_key=api_key or "")
    elif backend == "transformers":
        if not (model_path or "").strip():
            raise ValueError("give a local model folder (or a cached Hugging Face id) for the transformers backend")
        policy = replace(policy, model=model_path.strip())
    agent = replace(cfg.agent, protocol=protocol, max_steps=int(max_steps), s_total=int(s_total), top_k=int(top_k))
    return replace(cfg, policy=PolicyConfig.from_dict(policy.to_dict(redact=False)), agent=agent)
