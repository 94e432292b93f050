"""Policies that sample with a model being trained, and the training Segment one model call becomes.

    policy = VLPolicy(model, processor, temperature=1.0)      # any Qwen2.5-VL / Qwen3-VL
    policy = TextPolicy(model, tokenizer)                     # a causal LM, for text-only work
    for ev in Agent(retriever, policy, cfg).stream(question): # the real agent loop
        ...                                                   # each step's done ModelOutput carries its tokens

Each reply ends with a `Tokens` (agent/backends/base.py): the exact model inputs (token ids, and for VLMs the
pixel tensors and grid), the sampled token ids and their log-probabilities at sampling time. The loop puts
them on the step's done `ModelOutput` event, and rl/rollout.py turns those events into Segments. Only the
sampled tokens are ever trained on: the prompt, which holds every observation (search results, crops,
memory), is context. Log-probabilities are taken from `log_softmax(logits / temperature)`, the distribution
the tokens were actually drawn from; the trainer computes new ones the same way (`sequence_logprobs`), so
importance ratios compare like with like. Sampling uses the plain tempered distribution (top_k=0, top_p=1)
so those log-probs are exact.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch

from agent.backends.base import Policy, PolicyConfig, PolicyError, Tokens


@dataclass
class Segment:
    """One model call, as its done `ModelOutput` event carried it: what it saw and what it generated."""

    step: int
    inputs: dict[str, torch.Tensor]  # input_ids (1, P), attention_mask (1, P), [pixel_values, image_grid_thw]
    gen_ids: torch.Tensor  # (N,) sampled tokens, end-of-turn included
    old_logp: torch.Tensor  # (N,) their log-probs at sampling time
    text: str = ""
    node_id: str = ""  # the graph node the step created (filled from the trace)
    tool: str = ""  # the tool it called ("" for a malformed reply)
    gold_hit: bool | None = None  # retrieval steps: whether the results held gold evidence
    mask: float = 0.0  # GGPO mu_t (1: the step is left out of the update)
    entropy: torch.Tensor | None = None  # (N,) the sampling distribution's entropy at each token (aepo, branching)
    version: int = 0  # the policy version (updates taken) whose weights sampled it (rl/pipeline.py)


def sequence_logprobs(
    model, inputs: dict[str, torch.Tensor], gen_ids: torch.Tensor, temperature: float = 1.0, entropy: bool = False
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Log-probs (N,) of `gen_ids` after the prompt in `inputs`, under `model` (with grad if enabled); with
    `entropy`, also the entropy (N,) of the tempered distribution at each of those tokens, in nats (detached)."""
    device = next(model.parameters()).device
    prompt = inputs["input_ids"].to(device)  # (1, P)
    gen = gen_ids.to(device).view(1, -1)  # (1, N)
    ids = torch.cat([prompt, gen], dim=1)  # (1, P+N)
    kwargs = {k: v.to(device) for k, v in inputs.items() if k not in ("input_ids", "attention_mask")}
    for k in ("mm_token_type_ids", "token_type_ids"):  # per-token side inputs cover the prompt: extend with 0s
        if k in kwargs:
            kwargs[k] = torch.cat([kwargs[k], torch.zeros_like(gen)], dim=1)  # (1, P+N)
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs)
    n, p = gen.shape[1], prompt.shape[1]
    logits = out.logits[0, p - 1 : p - 1 + n].float() / temperature  # (N, V): position t predicts token t+1
    logp_all = torch.log_softmax(logits, dim=-1)  # (N, V)
    logp = logp_all.gather(1, gen[0].unsqueeze(1)).squeeze(1)  # (N,)
    if not entropy:
        return logp
    with torch.no_grad():
        ent = -(logp_all.exp() * logp_all).sum(dim=-1)  # (N,)
    return logp, ent


class _Sampler(Policy):
    """Shared sampling; subclasses turn agent messages into model inputs (`encode`)."""

    def __init__(
        self, model, tokenizer, temperature: float = 1.0, max_new_tokens: int = 256, greedy: bool = False
    ) -> None:
        if temperature <= 0:
            raise PolicyError("a trainable policy samples: temperature must be > 0 (1.0 is the usual choice)")
        self.model, self.tokenizer = model, tokenizer
        self.temperature, self.max_new_tokens = float(temperature), int(max_new_tokens)
        self.greedy = greedy  # evaluation: the most likely token each time (log-probs still at `temperature`)
        eos = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")}
        self.stop_ids = sorted(i for i in eos if isinstance(i, int) and i >= 0)
        if not self.stop_ids:
            raise PolicyError("the tokenizer has neither an eos token nor <|im_end|>; generation could not stop")

    def encode(self, messages: list[dict]) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def generation(self, protocol: Any) -> dict[str, Any]:
        """The trainer's own sampling, whatever the protocol (rollouts sample the plain tempered distribution)."""
        return {"max_new_tokens": self.max_new_tokens, "temperature": self.temperature}

    @torch.no_grad()
    def sample(self, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(gen_ids (N,), logp (N,), entropy (N,)) for one prompt, sampled from the tempered distribution (or, with
        `greedy`, its most likely tokens)."""
        device = next(self.model.parameters()).device
        batch = {k: v.to(device) for k, v in inputs.items()}
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.stop_ids[0]
        sampling = {"temperature": self.temperature, "top_k": 0, "top_p": 1.0}
        out = self.model.generate(
            **batch,
            do_sample=not self.greedy,
            **({} if self.greedy else sampling),
            max_new_tokens=self.max_new_tokens,
            eos_token_id=self.stop_ids,
            pad_token_id=pad,
        )  # (1, P+N)
        gen = out[0, batch["input_ids"].shape[1] :]  # (N,)
        # generate pads after the first stop token when it stops early in a batch; keep up to it
        stops = [i for i, t in enumerate(gen.tolist()) if t in self.stop_ids]
        gen = gen[: stops[0] + 1] if stops else gen  # (N,)
        logp, ent = sequence_logprobs(self.model, inputs, gen, self.temperature, entropy=True)  # (N,), (N,)
        return gen.cpu(), logp.cpu(), ent.cpu()

    @torch.no_grad()
    def sample_many(
        self, inputs: list[dict[str, torch.Tensor]]
    ) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """`sample` for several prompts with one batched generate: prompts left-padded, each row sampled from its
        own tempered distribution. Each reply's log-probs and entropies are then taken on its own unpadded prompt,
        exactly as `sample` takes them. Inputs with more than token ids (pixels) are sampled one by one."""
        if len(inputs) < 2 or any(set(x) - {"input_ids", "attention_mask"} for x in inputs):
            return [self.sample(x) for x in inputs]
        device = next(self.model.parameters()).device
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.stop_ids[0]
        width = max(x["input_ids"].shape[1] for x in inputs)
        ids = torch.full((len(inputs), width), pad, dtype=torch.long)  # (B, P)
        mask = torch.zeros((len(inputs), width), dtype=torch.long)  # (B, P): 0 on the left padding
        for r, x in enumerate(inputs):
            n = x["input_ids"].shape[1]
            ids[r, width - n :], mask[r, width - n :] = x["input_ids"][0], 1
        sampling = {"temperature": self.temperature, "top_k": 0, "top_p": 1.0}
        out = self.model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            do_sample=not self.greedy,
            **({} if self.greedy else sampling),
            max_new_tokens=self.max_new_tokens,
            eos_token_id=self.stop_ids,
            pad_token_id=pad,
        )  # (B, P+N)
        replies = []
        for r, x in enumerate(inputs):
            gen = out[r, width:]  # (N,)
            stops = [i for i, t in enumerate(gen.tolist()) if t in self.stop_ids]
            gen = gen[: stops[0] + 1] if stops else gen  # a finished row is padded after its stop token
            logp, ent = sequence_logprobs(self.model, x, gen, self.temperature, entropy=True)  # (N,), (N,)
            replies.append((gen.cpu(), logp.cpu(), ent.cpu()))
        return replies

    def evaluating(self):
        """A context in which the model is in eval mode, restored after."""
        return _eval_mode(self.model)

    def reply(self, inputs: dict[str, torch.Tensor], sampled: tuple) -> Iterator[str | Tokens]:
        """What `stream` yields for one sampled reply: its text, then its `Tokens`."""
        gen, logp, ent = sampled
        yield self.tokenizer.decode(gen, skip_special_tokens=True)
        yield Tokens(gen.tolist(), logp.tolist(), inputs, ent.tolist())

    def stream(self, messages: list[dict], view: Any = None) -> Iterator[str | Tokens]:
        inputs = {k: v.cpu() for k, v in self.encode(messages).items()}
        with self.evaluating():
            sampled = self.sample(inputs)
        yield from self.reply(inputs, sampled)


@contextmanager
def _eval_mode(model) -> Iterator[None]:
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


class VLPolicy(_Sampler):
    """A Qwen2.5-VL / Qwen3-VL model in memory, inputs built exactly as the transformers backend builds them."""

    def __init__(
        self, model, processor, temperature: float = 1.0, max_new_tokens: int = 256, max_pixels: int = 1_003_520
    ) -> None:
        from agent.backends.transformers_vl import TransformersPolicy

        super().__init__(model, processor.tokenizer, temperature, max_new_tokens)
        self._backend = TransformersPolicy.from_model(
            model, processor, PolicyConfig(backend="transformers", max_pixels=max_pixels, max_new_tokens=max_new_tokens)
        )
        self.patch = self._backend.patch
        self.name = "trainable-vl"

    def encode(self, messages: list[dict]) -> dict[str, torch.Tensor]:
        return dict(self._backend.prepare(messages))

    def describe(self) -> str:
        return f"trainable VL policy ({type(self.model).__name__}, T={self.temperature})"


class TextPolicy(_Sampler):
    """A causal LM: image parts become their reference in brackets ("[Picture 1]"), for text-only tasks."""

    is_vlm = False
    name = "trainable-text"

    def encode(self, messages: list[dict]) -> dict[str, torch.Tensor]:
        chat = []
        for m in messages:
            c = m.get("content", "")
            if not isinstance(c, str):
                c = "".join(p["text"] if p.get("type") == "text" else f"[{p.get('ref', 'image')}]" for p in c)
            chat.append({"role": m["role"], "content": c})
        ids = self.tokenizer.apply_chat_template(
            chat, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        return {"input_ids": ids["input_ids"], "attention_mask": ids["attention_mask"]}  # (1, P) each

    def describe(self) -> str:
        return f"trainable text policy ({type(self.model).__name__}, T={self.temperature})"


# -- the trainer's model and its sampling policy (cfg: rl/config.py TrainConfig) ----------------------------
def load_model(cfg):
    """(model, processor_or_tokenizer, is_vl) from a folder or id; LoRA applied when configured."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

    local = Path(cfg.model).exists()
    mcfg = AutoConfig.from_pretrained(cfg.model, local_files_only=local)
    is_vl = hasattr(mcfg, "vision_config")
    if is_vl:
        model = AutoModelForImageTextToText.from_pretrained(cfg.model, local_files_only=local)
        proc = AutoProcessor.from_pretrained(cfg.model, local_files_only=local)
    else:
        model = AutoModelForCausalLM.from_pretrained(cfg.model, local_files_only=local)
        proc = AutoTokenizer.from_pretrained(cfg.model, local_files_only=local)
    if cfg.lora:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError as e:
            raise ImportError("LoRA needs peft: install the training extra with `scripts/setup.sh train`") from e
        lc = dict(cfg.lora)
        model = get_peft_model(
            model,
            LoraConfig(
                r=lc.get("r", 16),
                lora_alpha=lc.get("alpha", 32),
                lora_dropout=lc.get("dropout", 0.0),
                target_modules=lc.get("target_modules", ["q_proj", "v_proj"]),
            ),
        )
    return model, proc, is_vl


def make_policy(model, proc, is_vl: bool, cfg):
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if is_vl:
        pol = VLPolicy(base, proc, cfg.temperature, cfg.max_new_tokens)
    else:
        pol = TextPolicy(base, proc, cfg.temperature, cfg.max_new_tokens)
    pol.model = model  # sample with the adapter (if any) active
    return pol
