"""`TrainConfig`: every setting of a training run (GGPO, GRPO, GSPO, GPPO, AEPO, ADORA and the options that
compose with them, rl/methods.py), with its help, read from YAML and `key=value`;
and `SFTConfig`, the SFT cold start's.

    vimrag train --config rl/configs/tiny_cpu.yaml updates=4 agent.max_steps=3
    vimrag sft --traces runs/eval/RUN --model PATH --output-dir runs/sft

It lives apart from rl/trainer.py so that `vimrag train --help` builds its flags without importing torch.
The agent's settings are the agent's own config (`agent: AgentConfig`, so `agent.top_k=2` or `--top-k 2`);
the sampling settings (temperature, max_new_tokens) are the trainer's, since it samples with the model it
trains rather than through a policy backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from agent.backends.base import PolicyConfig
from agent.config import Config, load, setting
from agent.settings import AgentConfig


@dataclass
class TrainConfig(Config):
    """One training run: model and data, the agent its rollouts run through, the method and the optimizer."""

    config_name = "training"

    model: str = setting("", "a local folder or HF id: Qwen2.5-VL / Qwen3-VL, or a causal LM (text-only work)")
    dataset: str = setting("", "an eval dataset name (eval/datasets.py), e.g. demo or jsonl:PATH")
    corpus: str | None = setting(None, "the documents, for datasets that do not carry their own")
    index: str | None = setting(None, "index folder (default: the dataset's own)")
    search_url: str = setting(
        "", "search through this server (`vimrag serve-search`'s or VRAG's) instead of the local index"
    )
    agent: AgentConfig = setting(factory=AgentConfig, help="the agent the rollouts run through (agent.KEY=VALUE)")
    prompt_file: str | None = setting(
        None, "read the protocol's prompts from a file (agent.protocols.read_prompt_file)"
    )
    prompt_role: str = setting("", "which prompt a plain-text prompt_file replaces (default: the protocol's main one)")
    method: str = setting(
        "ggpo",
        "the policy-gradient method (rl/methods.py): ggpo, grpo, gspo, gppo (gradient-preserving clip), aepo "
        "(entropy-balanced update) or adora (advantage weighted by the group's utility)",
        choices=("ggpo", "grpo", "gspo", "gppo", "aepo", "adora"),
    )
    level: str | None = setting(
        None, "ggpo: token or sequence ratios (default: sequence, the paper's GSPO base)", choices=("token", "sequence")
    )
    step_mask: bool | None = setting(
        None, "GGPO's step mask mu_t on top of any method (default: on for ggpo only), e.g. gppo with the mask"
    )
    clip_c: float | None = setting(
        None, "dual-clip bound on the loss of negative advantages (default: the method's, 3 for gppo and aepo)"
    )
    adora_lambda: float = setting(0.1, "adora: the factor on a group whose correct replies are not the longer ones")
    aepo_entropy_coef: float = setting(0.2, "aepo: A (1 + coef z(H)), the entropy-aware advantage's weight")
    tool_advantage: float = setting(
        0.0,
        "ToolPO: weight of the correct-tool-call advantage added on each tool call's tokens (0: off; token-level "
        "ratios only)",
    )
    branching: str = setting(
        "none",
        "rollouts that fork after tool calls where entropy rose: arpo, aepo (with its root budget and its "
        "penalty on consecutive forks), or none",
        choices=("none", "arpo", "aepo"),
    )
    initial_rollouts: int = setting(0, "branching: trajectories started from the question (0: half the group)")
    branch_threshold: float = setting(0.5, "branching: the draw's threshold (ARPO's branch_probability)")
    branch_entropy_weight: float = setting(0.2, "branching: weight of the entropy change (ARPO's entropy_weight)")
    horizons: list[int] = setting(
        factory=list,
        help="ScalingInter-RL's curriculum: agent.max_steps for each stage, e.g. [2, 4, 6] (empty: fixed)",
    )
    horizon_every: int = setting(100, "ScalingInter-RL: updates per stage of `horizons`")
    group_size: int = setting(4, "trajectories sampled per question (>= 2)")
    questions_per_update: int = setting(2, "questions per update, split across processes")
    updates: int = setting(10, "optimizer updates in the run")
    lr: float = setting(1e-6, "AdamW learning rate")
    weight_decay: float = setting(0.0, "AdamW weight decay")
    warmup_updates: int = setting(0, "updates of linear learning-rate warm-up")
    max_grad_norm: float = setting(1.0, "gradient clipping norm (0: none)")
    clip_eps: float | None = setting(
        None,
        "clip range below 1 (default: the level's published one, 0.2 for token ratios, GSPO's 3e-4 for sequence "
        "ratios: rl/methods.py clip_range)",
    )
    clip_eps_high: float | None = setting(
        None, "clip range above 1 (default: clip_eps if set, else 0.2 for token ratios and 4e-4 for sequence ratios)"
    )
    ppo_epochs: int = setting(1, "passes over each update's batch of rollouts (verl's ppo_epochs; rl/update.py)")
    mini_batch_size: int | None = setting(
        None,
        "trajectories per optimizer step, over all processes (verl's ppo_mini_batch_size x rollouts); each update "
        "takes ppo_epochs x ceil(batch / mini_batch_size) steps (default, or 0: the whole batch, one step)",
    )
    kl_coef: float = setting(0.0, "k3 KL to the frozen initial policy (0: no reference model is kept)")
    length_norm: str = setting(
        "token_mean",
        "token_mean: every generated token of the update weighs the same; seq_mean: mean within each "
        "segment, then over segments",
        choices=("token_mean", "seq_mean"),
    )
    temperature: float = setting(1.0, "sampling temperature of the rollouts")
    max_new_tokens: int = setting(256, "cap on generated tokens per agent step")
    reward: str = setting("vimrag", "the reward function, a name in rl/rewards.py REWARDS")
    grad_accum: int = setting(1, "updates whose gradients are summed before one optimizer step")
    mixed_precision: str = setting(
        "auto", "auto: bf16 on a GPU that has it, else fp32", choices=("auto", "no", "bf16", "fp16")
    )
    lora: dict[str, Any] | None = setting(
        None, "LoRA instead of full fine-tuning: {r: 16, alpha: 32, dropout: 0.05, target_modules: [...]}"
    )
    save_every: int = setting(50, "a checkpoint every this many updates (0: only at the end)")
    output_dir: str = setting("runs/train/default", "checkpoints, metrics.jsonl, logs and the resolved config.json")
    resume: bool = setting(True, "continue from the newest checkpoint in output_dir")
    seed: int = setting(0, "seed of sampling, data order and initialisation")
    log_with: list[str] = setting(
        factory=lambda: ["tensorboard"], help="trackers besides metrics.jsonl: tensorboard, wandb"
    )
    rollout: str = setting(
        "local",
        "local: the model being trained samples; served: a vLLM server that hot-loads each update's "
        "LoRA adapter (rl/served.py)",
        choices=("local", "served"),
    )
    rollout_url: str = setting("", "served: the server's OpenAI-compatible API root, e.g. http://HOST:8000/v1")
    rollout_api_key: str = setting("", "served: the server's --api-key, if it has one", secret=True)
    rollout_workers: int = setting(
        16,
        "served: trajectories sampled at once (the server batches); async: groups sampled at once, each with its "
        "trajectories on threads of their own",
    )
    lockstep: bool = setting(
        False,
        "local, sync: sample an update's trajectories all at once, one thread each, their model calls batched "
        "round by round (rl/rollout.py rollout_lockstep); faster on a CPU, the same policy, other random draws",
    )
    rollout_mode: str = setting(
        "sync",
        "sync: each update samples its batch with the weights it starts from; async: rollout threads keep "
        "sampling with the newest weights while the trainer updates (rl/pipeline.py), and the loss corrects for the "
        "lag with AReaL's decoupled objective",
        choices=("sync", "async"),
    )
    max_staleness: int = setting(
        1, "async: a trajectory sampled more than this many updates before the update that would train on it is dropped"
    )
    behav_cap: float | None = setting(
        5.0,
        "async: tokens whose pi_prox / pi_behav exceeds this are left out of the loss (AReaL's default 5; null: none)",
    )
    mel: bool = setting(
        False,
        "Meta-Experience Learning (rl/mel.py, arXiv 2602.10224): a reflector compares one success and one failure of "
        "each group, names the step where they part and a lesson, learned as an NLL target beside the RL loss",
    )
    mel_coef: float = setting(0.1, "mel: the weight of the lessons' token-averaged NLL in each optimizer step's loss")
    mel_reflector: str = setting(
        "policy",
        "mel: policy (the model being trained, in process; the rollout server under rollout=served) or the API root "
        "of any OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1",
    )
    mel_reflector_model: str = setting("", "mel, endpoint reflector: the model name the endpoint serves")
    mel_api_key: str = setting("", "mel, endpoint reflector: its API key, if it has one", secret=True)
    mel_max_new_tokens: int = setting(256, "mel: the most tokens one reflection may take")

    @property
    def batch_size(self) -> int:
        """Trajectories in one update, over all processes."""
        return self.questions_per_update * self.group_size

    @classmethod
    def load(
        cls, path: str | Path | None = None, overrides: Sequence[str] = (), values: Mapping | None = None
    ) -> "TrainConfig":
        """From YAML, then `key=value` overrides (values parsed as YAML: 1e-6, true, [a, b]), then `values`."""
        if path and not Path(path).is_file():
            raise FileNotFoundError(f"training config {path} does not exist; see rl/configs/ for examples")
        cfg = load(cls, path, overrides, values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        from rl.methods import method_level
        from rl.rewards import REWARDS

        if not self.model:
            raise ValueError("set `model` (a local folder or HF id) in the training config")
        if not self.dataset:
            raise ValueError("set `dataset` (e.g. jsonl:questions.jsonl with corpus: DIR)")
        level = method_level(self.method, self.level)
        if self.tool_advantage and level != "token":
            raise ValueError(
                f"tool_advantage gives each token its own advantage, which needs token-level ratios; {self.method} "
                "trains at sequence level here (use level=token with ggpo, or a token-level method)"
            )
        if self.ppo_epochs < 1 or (self.mini_batch_size or 0) < 0:
            raise ValueError(
                "ppo_epochs must be >= 1 and mini_batch_size >= 0 (0 or unset: the whole batch); got "
                f"{self.ppo_epochs}, {self.mini_batch_size}"
            )
        several = self.ppo_epochs > 1 or (self.mini_batch_size or 0) and self.mini_batch_size < self.batch_size
        if several and self.grad_accum != 1:
            raise ValueError(
                "several optimizer steps per update (ppo_epochs, mini_batch_size) and grad_accum (several updates per "
                "step) pull opposite ways; set grad_accum=1"
            )
        if self.mel:
            if self.mel_coef < 0 or self.mel_max_new_tokens < 1:
                raise ValueError(
                    f"mel_coef must be >= 0 and mel_max_new_tokens >= 1; got {self.mel_coef}, {self.mel_max_new_tokens}"
                )
            url = self.mel_reflector.startswith(("http://", "https://"))
            if self.mel_reflector != "policy" and not url:
                raise ValueError(f"mel_reflector is `policy` or an http(s) API root; got {self.mel_reflector!r}")
            if url and not self.mel_reflector_model:
                raise ValueError("an endpoint mel_reflector needs mel_reflector_model, the model name it serves")
        if self.branching != "none" and not 0 <= self.initial_rollouts <= self.group_size:
            raise ValueError(f"initial_rollouts must be between 0 (half the group) and group_size={self.group_size}")
        if self.horizons:
            from rl.curriculum import horizon

            horizon(1, self.horizons, self.horizon_every)  # validates the schedule
        if self.reward not in REWARDS:
            raise ValueError(f"unknown reward {self.reward!r}; choose one of {sorted(REWARDS)}")
        if self.group_size < 2:
            raise ValueError("group_size must be >= 2: advantages are normalised within a group")
        if self.length_norm not in ("token_mean", "seq_mean"):
            raise ValueError("length_norm must be token_mean or seq_mean")
        if self.rollout not in ("local", "served"):
            raise ValueError(f"rollout must be local or served, not {self.rollout!r}")
        if self.rollout == "served" and not self.rollout_url:
            raise ValueError(
                f"rollout=served needs rollout_url, the vLLM server's API root (e.g. {PolicyConfig.base_url})"
            )
        if self.rollout_mode not in ("sync", "async"):
            raise ValueError(f"rollout_mode must be sync or async, not {self.rollout_mode!r}")
        if self.rollout_mode == "async" and (self.max_staleness < 0 or self.rollout_workers < 1):
            raise ValueError(
                f"async rollouts need max_staleness >= 0 and rollout_workers >= 1; got {self.max_staleness}, "
                f"{self.rollout_workers}"
            )
        if self.lockstep and (self.rollout, self.rollout_mode, self.branching) != ("local", "sync", "none"):
            raise ValueError(
                "lockstep batches a local policy's synchronous rollouts; it does not apply to rollout=served (the "
                "server batches), rollout_mode=async (its own threads) or branching (a fork waits for its parent); "
                f"got rollout={self.rollout}, rollout_mode={self.rollout_mode}, branching={self.branching}"
            )
        if self.behav_cap is not None and self.behav_cap <= 1.0:
            raise ValueError(f"behav_cap bounds pi_prox / pi_behav from above and must be > 1; got {self.behav_cap}")
        if self.rollout == "served" and not self.lora:
            raise ValueError(
                "rollout=served needs `lora`: the server hot-loads each update's adapter, but it "
                "cannot swap full fine-tuned weights; use rollout=local for full fine-tuning"
            )


@dataclass
class SFTConfig(Config):
    """SFT cold start (rl/sft.py): the saved traces, the model it starts from, and the schedule."""

    config_name = "sft"

    traces: str = setting("", "a `vimrag eval` run folder, its traces/, trace files, a glob, or an ACC .jsonl")
    model: str = setting("", "model folder or HF id to start from")
    output_dir: str = setting("", "where the tuned model and sft_config.json are saved")
    epochs: int = setting(1, "passes over the examples")
    lr: float = setting(1e-5, "AdamW learning rate")
    grad_accum: int = setting(8, "examples whose gradients are summed per optimizer step")
    min_score: float | None = setting(
        None, "only traces whose prediction scored at least this (needs the run's predictions.jsonl)"
    )
    images: bool = setting(True, "show the pictures (--no-images: they become [Picture k])")
    max_examples: int = setting(0, "use at most this many steps (0: all)")
    batch_size: int = setting(
        1, "examples per forward pass, padded together (text-only models; a VL model takes them one at a time)"
    )
    group_by_length: bool = setting(
        False,
        "batch examples of similar length together (each run of 50 batches sorted by length, the batches shuffled): "
        "less padding, the same examples per epoch",
    )
    schedule: str = setting(
        "constant",
        "learning rate: constant, or linear decay to 5% after `warmup` (TRL's names)",
        choices=("constant", "linear"),
    )
    warmup: float = setting(0.0, "share of the optimizer steps with a linear warm-up of the learning rate")
    max_grad_norm: float = setting(1.0, "gradient clipping norm (0: none), TRL's default")
    seed: int = setting(0, "seed of the example order and initialisation")
    mixed_precision: str = setting(
        "no",
        "no: fp32; bf16: forward passes under bf16 autocast (accelerate's), on a GPU or on a CPU with native bf16 "
        "(rl/bench_precision.py measures it); off by default, since rl/RESULTS.md's runs are fp32",
        choices=("no", "bf16"),
    )

    def __post_init__(self) -> None:
        missing = [f"--{n.replace('_', '-')}" for n in ("traces", "model", "output_dir") if not getattr(self, n)]
        if missing:
            raise ValueError(f"SFT needs {', '.join(missing)}: the traces, the model to start from, and where to save")
        if self.batch_size < 1 or self.grad_accum < 1 or not 0.0 <= self.warmup < 1.0:
            raise ValueError(
                f"batch_size and grad_accum must be >= 1 and warmup in [0, 1); got {self.batch_size}, "
                f"{self.grad_accum}, {self.warmup}"
            )
