"""Rollouts sampled by a vLLM server whose LoRA adapter follows the trainer (`rollout: served`).

    VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve Qwen/Qwen2.5-VL-7B-Instruct \\
        --enable-lora --max-lora-rank 64 --generation-config vllm --port 8000
    vimrag train --config rl/configs/qwen2_5_vl_7b_ggpo.yaml rollout=served rollout_url=http://127.0.0.1:8000/v1

Before each update's rollouts the main process saves the current LoRA adapter under
`output_dir/served_adapters/update-N` and asks the server to load it (POST /v1/load_lora_adapter, vLLM's
runtime LoRA API; the previous adapter is then unloaded). Every process then samples its trajectories
from the server under that adapter's name. The server and the trainer must see the same folder (one
machine, or a shared file system).

Each reply comes back with its token ids and their log-probs (`logprobs` plus vLLM's
`return_tokens_as_token_ids`). The model inputs are rebuilt locally by the trainer's own processor from
the same messages (the chat template and image processing the server applies), and the old log-probs are
recomputed locally, so the PPO ratio compares the trainer's numbers with the trainer's numbers; ids, local
log-probs and inputs end the reply as its `Tokens`, which rl/rollout.py reads off the events. The server's
log-probs are kept as a check: `served_logp_gap` in metrics.jsonl, the mean |served - local| per token, is
near 0 when the server runs the trainer's weights on the same inputs, and large when it does not (an adapter
that failed to load, a different processor resolution, a quantised server).

An update's trajectories run on `rollout_workers` threads at once (rl/rollout.py `rollout_concurrent`), so
the server can batch their requests. With async rollouts (rl/pipeline.py) each thread samples from the adapter of
its weights snapshot's version, its log-probs rebuilt by that snapshot, and an old adapter is unloaded only once
no thread on any process samples from it. Full fine-tuning cannot be served this way (vLLM has no HTTP call that
swaps the base weights), so `rollout: served` needs `lora`.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, Iterator

import torch

from agent.backends.base import Policy, PolicyConfig, PolicyError, Tokens
from rl.policy import sequence_logprobs

TOKEN_ID = re.compile(r"token_id:(\d+)$")  # vLLM's token text under return_tokens_as_token_ids
ADAPTER_PREFIX = "vimrag-policy"


def make_client(url: str, api_key: str = "", timeout_s: float = 600.0):
    """The HTTP client (the agent's OpenAI-compatible backend) for a rollout server."""
    from agent.backends.openai_compat import OpenAIPolicy

    return OpenAIPolicy(
        PolicyConfig(backend="openai", base_url=url, api_key=api_key, model=ADAPTER_PREFIX, timeout_s=timeout_s)
    )


def adapter_name(update: int) -> str:
    """The served name of the adapter trained for `update` updates (the same on every process)."""
    return f"{ADAPTER_PREFIX}-{update}"


class AdapterSync:
    """Keeps the server's adapters equal to the trainer's: save, load the new one, unload the old ones. With
    `keep_old` (async rollouts) an old adapter stays loaded until `prune` is told no rollout samples from it."""

    def __init__(self, client, folder: str | Path, keep_old: bool = False) -> None:
        self.client = client
        self.folder = Path(folder)
        self.keep_old = keep_old
        self.loaded: dict[int, Path] = {}  # update -> adapter folder, oldest first

    def push(self, model, update: int, state_dict: dict | None = None) -> str:
        """Save and load update `update`'s adapter; `state_dict` is the gathered one under FSDP / ZeRO-3
        (accelerate's `get_state_dict`, which every process must call)."""
        if not hasattr(model, "peft_config"):
            raise PolicyError(
                "served rollouts need a LoRA adapter (set `lora` in the training config): the "
                "server can hot-load an adapter, but not new base weights"
            )
        name = adapter_name(update)
        path = (self.folder / f"update-{update:06d}").resolve()
        model.save_pretrained(path, state_dict=state_dict)  # a PeftModel writes the adapter only
        self.client.post("/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})
        self.loaded[update] = path
        if not self.keep_old:
            self.prune(update)
        return name

    def prune(self, oldest_needed: int) -> None:
        """Unload (and delete) every adapter older than update `oldest_needed`."""
        for update in [u for u in self.loaded if u < oldest_needed]:
            try:
                self.client.post("/unload_lora_adapter", {"lora_name": adapter_name(update)})
            except PolicyError:
                pass  # a stale adapter left on the server costs memory, not correctness
            shutil.rmtree(self.loaded.pop(update), ignore_errors=True)


def parse_choice(choice: dict) -> tuple[list[int], list[float], str]:
    """(token ids, their served log-probs, finish_reason) from one chat-completion choice.

    >>> parse_choice({"logprobs": {"content": [{"token": "token_id:17", "logprob": -0.5}]},
    ...               "finish_reason": "stop"})
    ([17], [-0.5], 'stop')
    """
    content = ((choice.get("logprobs") or {}).get("content")) or []
    ids, logps = [], []
    for entry in content:
        m = TOKEN_ID.search(str(entry.get("token", "")))
        if not m:
            raise PolicyError(
                f"the rollout server returned the token {entry.get('token')!r}, not 'token_id:N'; "
                "served rollouts need vLLM's `return_tokens_as_token_ids` (vLLM >= 0.6)"
            )
        ids.append(int(m.group(1)))
        logps.append(float(entry.get("logprob", 0.0)))
    if not content and (choice.get("message") or {}).get("content"):
        raise PolicyError("the rollout server sent text without log-probs; it must honour `logprobs: true` (vLLM does)")
    return ids, logps, str(choice.get("finish_reason") or "")


class ServedPolicy(Policy):
    """Samples on the server and ends each reply with its `Tokens`, like the in-process samplers (`local`
    builds the inputs and recomputes the log-probs with the trainer's model)."""

    def __init__(self, local, client, model_name: str) -> None:
        self.local, self.client, self.model_name = local, client, model_name
        self.is_vlm = local.is_vlm
        self.patch = getattr(local, "patch", 28)
        self.name = "served"
        self.gaps: list[float] = []  # per call: mean |served - local| log-prob per token, a diagnostic only
        tok = local.tokenizer
        im_end = tok.convert_tokens_to_ids("<|im_end|>")
        self.end_id = (
            im_end if isinstance(im_end, int) and im_end >= 0 and im_end != tok.unk_token_id else local.stop_ids[0]
        )

    def describe(self) -> str:
        return f"served policy ({self.client.base_url}, adapter {self.model_name})"

    def generation(self, protocol: Any) -> dict[str, Any]:
        return self.local.generation(protocol)

    def stream(self, messages: list[dict], view: Any = None) -> Iterator[str | Tokens]:
        loc = self.local
        choice = self.client.complete(
            messages,
            model=self.model_name,
            temperature=loc.temperature,
            max_tokens=loc.max_new_tokens,
            top_p=1.0,
            top_k=-1,
            min_p=0.0,
            repetition_penalty=1.0,  # the plain tempered distribution
            logprobs=True,
            return_tokens_as_token_ids=True,
            skip_special_tokens=False,
        )
        ids, served, finish = parse_choice(choice)
        if finish == "stop" and (not ids or ids[-1] not in loc.stop_ids):
            ids.append(self.end_id)  # vLLM leaves the end-of-turn token out; the policy learns to end its turn
        if not ids:
            raise PolicyError("the rollout server returned an empty reply without finishing; check its log")
        inputs = {k: v.cpu() for k, v in loc.encode(messages).items()}
        gen = torch.tensor(ids, dtype=torch.long)  # (N,)
        was_training = loc.model.training
        loc.model.eval()
        try:
            with torch.no_grad():
                logp, ent = sequence_logprobs(loc.model, inputs, gen, loc.temperature, entropy=True)  # (N,), (N,)
        finally:
            loc.model.train(was_training)
        if served:
            n = len(served)
            self.gaps.append(float((logp[:n].cpu() - torch.tensor(served)).abs().mean()))
        yield loc.tokenizer.decode(gen, skip_special_tokens=True)
        yield Tokens(ids, logp.cpu().tolist(), inputs, ent.cpu().tolist())
