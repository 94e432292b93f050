"""`ExperimentConfig`: every setting of the RL comparison (rl/experiment.py); `python -m rl.experiment --help` lists
them."""

from __future__ import annotations

from dataclasses import dataclass

from agent.config import Config, setting, setting_like
from rl.config import TrainConfig

CURRICULA = ("none", "scalinginter")
PROTOCOL_DEFAULTS = {"vrag": (6, 24), "vimrag": (8, 56)}  # agent steps per episode, new tokens per step
RECALL_HINT = 0.5  # copy pre-training's recall below which rl/RESULTS.md's two starts near zero stayed (0.21, 0.44)


@dataclass
class ExperimentConfig(Config):
    """Every setting of the experiment; `python -m rl.experiment --help` lists them."""

    config_name = "experiment"

    out: str = setting("runs/rl_experiment", "run folder: the gym, the models, results.md/json and the figures")
    methods: list[str] = setting(
        factory=lambda: ["grpo,gspo,ggpo,gppo,aepo,adora"], help="methods, comma-separated", nargs="+"
    )
    seeds: int = setting(5, "RL seeds per method (each from the same SFT checkpoint); 0 measures the warm start alone")
    protocol: str = setting(
        "vimrag",
        "vimrag: the gym on VimRAG's DAG protocol (search nodes with parents, memorize, an answer with parents; dead "
        "ends exist); vrag: VRAG's linear chain of tag actions, the setting of rl/RESULTS.md's earlier sections",
        choices=("vimrag", "vrag"),
    )
    ppo_epochs: int = setting_like(TrainConfig, "ppo_epochs", 1)
    mini_batch_size: int | None = setting_like(TrainConfig, "mini_batch_size", 6)
    curriculum: str = setting("none", "scalinginter: agent.max_steps 3, then max_steps, halfway", choices=CURRICULA)
    sft_envs: int = setting(1000, "training environments whose expert traces the SFT warm start imitates")
    rl_envs: int = setting(300, "fresh training environments RL draws its questions from")
    test_envs: int = setting(20, "held-out environments per hop count (3 questions each)")
    hidden: int = setting(128, "hidden size of the tiny causal LM")
    layers: int = setting(3, "layers of the tiny causal LM")
    vocab: int = setting(600, "vocabulary size of the tokenizer trained on training text")
    sft_epochs: int = setting(4, "epochs of the SFT warm start")
    sft_lr: float = setting(1e-3, "learning rate of the SFT warm start")
    sft_batch: int = setting(16, "SFT examples per forward pass")
    mixed_precision: str = setting(
        "auto",
        "auto: the trainer's default (bf16 on a GPU that has it, else fp32: rl/RESULTS.md's CPU runs, bit for bit), "
        "SFT in fp32; bf16: SFT and RL forward passes under bf16 autocast, on a CPU too (rollout sampling stays "
        "fp32); on the gym's tiny LM bf16 measured slower on a CPU (python -m rl.bench_precision)",
        choices=("auto", "no", "bf16"),
    )
    sft_seed: int = setting(
        2,
        "seed of the tiny LM's initial weights and of the SFT example order (2: the start whose GRPO gain on 2-hop "
        "questions rl/RESULTS.md measured; the table there has all five seeds' starts)",
    )
    copy_pretrain: int = setting(
        2000,
        "updates of copy pre-training (rl/pretrain.py: repeated and key-value recall sequences of random tokens) "
        "before SFT, so the tiny LM can copy before it imitates; 0 skips it",
    )
    copy_rounds: int = setting(
        4,
        "at most this many rounds of --copy-pretrain updates, each with its own warm-up and decay: a round whose "
        "recall on fresh rows ends below --copy-recall is followed by another (rl/pretrain.py)",
    )
    copy_recall: float = setting(RECALL_HINT, "the recall that ends copy pre-training's rounds early")
    rl_hops: list[int] = setting(
        factory=lambda: [2],
        help="hop counts of the RL-pool questions RL trains on (the environments stay the same; 2 alone spends "
        "every rollout on the hop decision the comparison measures)",
        nargs="+",
    )
    updates: int = setting_like(TrainConfig, "updates", 8)
    group: int = setting_like(TrainConfig, "group_size", 6)
    questions: int = setting_like(TrainConfig, "questions_per_update", 3)
    lr: float = setting_like(TrainConfig, "lr", 1e-4)
    temperature: float = setting_like(TrainConfig, "temperature", 1.0)
    eval_temperature: float = setting(
        0.0, "held-out episodes: 0 decodes greedily (the usual evaluation), above 0 samples at that temperature"
    )
    max_new_tokens: int = setting(0, "cap on generated tokens per agent step (0: the protocol's, vrag 24, vimrag 56)")
    max_steps: int = setting(0, "agent steps per episode (0: the protocol's, vrag 6, vimrag 8)")
    eval_hops: list[int] = setting(
        factory=lambda: [1, 2],
        help="held-out hop counts measured after RL (the SFT start is measured on 1 and 2)",
        nargs="+",
    )
    threshold: float = setting(
        0.5, "the table reports the updates until the training reward (3-update mean) reaches this"
    )
    jobs: int = setting(
        0,
        "RL runs (method and seed) at once, each in its own worker process with cores/jobs torch threads "
        "and its own model and index; 0: one per core. A run's figures can differ in the last digits with another "
        "thread count",
    )
    lockstep: bool = setting(
        True,
        "sample each update's rollouts, and the held-out episodes, all at once with their model calls batched "
        "(TrainConfig lockstep): 1.4x the updates per hour here (rl/bench_lockstep.py); --no-lockstep samples one "
        "episode at a time, with other random draws",
    )
    reuse_sft: bool = setting(False, "keep OUT/sft from an earlier run with the same gym settings")
    fine_print: float = setting(
        0.0,
        "share of the training environments that are page images, each code in fine print with probability 0.5 "
        "(legible only in a crop; needs tesseract); above 0 the held-out set gains 1-hop picture environments "
        "whose every code is in fine print, reported as their own column",
    )
    name_syllables: int = setting(
        2,
        "syllables of each word of a person's name (rl/gym_words.py word_pools): 2 gives 461 training words, which a "
        "tiny model can memorize; 3 gives 11,060, each seen about once, so names must be copied (a new gym and warm "
        "start)",
        choices=[2, 3],
    )
    varied_layouts: bool = setting(
        True,
        "assemble each training page and question frame from parts (rl/gym_words.py varied_layout) instead of 5 page "
        "and 4 question templates, so a code is found by its label, not its place (a new gym and warm start)",
    )
    noise_words: float = setting(
        0.5,
        "with --varied-layouts: the share of training pages and questions that also carry made-up words "
        "(rl/gym_words.py noise_word), so that a word never seen in training does not change what the model does",
    )
    mid_frames: float = setting(
        0.0,
        "with --varied-layouts: the share of training questions whose name stands mid-sentence, followed by a word "
        '(rl/gym_words.py _MID_FRAMES), as in the held-out "Which access code does NAME use?" (a new warm start; '
        "the corpus and index stay)",
    )
    crop_repeat: int = setting(
        1,
        "SFT mix: the expert traces that crop are imitated this many times (--fine-print runs: a crop is 2%% of the "
        "steps at --fine-print 0.2)",
    )
    fresh_rl_names: bool = setting(
        False,
        "name the SFT environments' people with four fifths of the training words and the RL environments' with "
        "the other fifth (rl/gym_words.py RL_WORDS), so RL rewards copying names the warm start never saw, as held-out "
        "questions need (a new gym and warm start: do not --reuse-sft one made without it)",
    )

    def __post_init__(self) -> None:
        steps, tokens = PROTOCOL_DEFAULTS[self.protocol]  # 0: the protocol's own
        self.max_steps = self.max_steps or steps
        self.max_new_tokens = self.max_new_tokens or tokens
