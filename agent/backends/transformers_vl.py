"""In-process Qwen-VL policy through transformers: Qwen2-VL, Qwen2.5-VL and Qwen3-VL checkpoints.

    policy = load_policy(PolicyConfig(backend="transformers", model="Qwen/Qwen2.5-VL-3B-Instruct"))
    for chunk in policy.stream(messages):
        print(chunk, end="")

The agent has already resized every image to its allocated pixel budget on the model's patch grid
(28 px for Qwen2.5-VL, 32 px for Qwen3-VL; `self.patch` tells the agent which). The Qwen image processor
would otherwise resize again to its own [min_pixels, max_pixels] range (e.g. blow a small crop up to
256x256 on Qwen3-VL), so each call passes `size={"shortest_edge": patch**2, "longest_edge": max_pixels}`:
an on-grid image of at least one merged patch then passes through unchanged, and anything larger than
`config.max_pixels` is still shrunk. `last_inputs_info` records what the model actually saw.

Left out on purpose: batching, video inputs (the agent sends key frames as images), and tool-call
parsing (the agent parses the text). Generation runs in a thread feeding a TextIteratorStreamer; the
stream ends with the reply's token ids (`Tokens`), without log-probs (rl/policy.py samples with those).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Iterator

from agent.backends.base import Policy, PolicyConfig, PolicyError, Tokens, generation_settings

# model_type values whose processors follow the Qwen2-VL smart-resize scheme this backend controls
QWEN_VL_TYPES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe")
DTYPES = ("auto", "bfloat16", "float16", "float32")


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _resolve_source(model: str) -> str:
    """A local folder (checked here, so the error names it) or an HF id left to the hub loader."""
    if not model.strip():
        raise PolicyError(
            "the transformers backend needs a model: set model to a local Qwen-VL folder or "
            "an HF id such as Qwen/Qwen2.5-VL-3B-Instruct"
        )
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise PolicyError(
                f"model folder {path} has no config.json; point model at the folder holding "
                "config.json, the weights and the processor files of a Qwen-VL checkpoint"
            )
        return str(path)
    looks_local = path.is_absolute() or model.startswith((".", "~")) or model.count("/") > 1 or "\\" in model
    if looks_local:
        raise PolicyError(
            f"model folder {model} does not exist; pass an existing local folder or an HF id "
            "such as Qwen/Qwen2.5-VL-3B-Instruct"
        )
    return model


def _load_error(source: str, what: str, exc: Exception) -> PolicyError:
    if Path(source).exists():
        fix = "check that the folder is a complete Qwen-VL checkpoint (config, weights, processor and tokenizer files)"
    elif _offline():
        fix = (
            f"HF_HUB_OFFLINE is set, so only the local cache is searched: download it first "
            f"(`hf download {source}`) or pass a local folder"
        )
    else:
        fix = "check the id and your network access, or pass a local folder"
    reason = " ".join(str(exc).split())  # hub errors span several lines; keep the message on one
    return PolicyError(f"could not load the {what} of model {source!r}: {type(exc).__name__}: {reason}; {fix}")


def _resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise PolicyError(f"device {device!r} was asked for but torch sees no CUDA GPU; use device='cpu' or 'auto'")
    return device


def _resolve_dtype(dtype: str, device: str):
    import torch

    if dtype not in DTYPES:
        raise PolicyError(f"unknown dtype {dtype!r}; choose one of {list(DTYPES)}")
    if dtype == "auto":
        on_gpu = device.startswith("cuda")
        return torch.bfloat16 if on_gpu and torch.cuda.is_bf16_supported() else torch.float32
    return getattr(torch, dtype)


class TransformersPolicy(Policy):
    """A Qwen-VL checkpoint loaded with AutoProcessor + AutoModelForImageTextToText."""

    name = "transformers"

    def __init__(self, config: PolicyConfig):
        try:
            import torch
            from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor
        except ImportError as exc:  # torch/transformers are core deps, but say so plainly if broken
            raise PolicyError(
                f"the transformers backend needs torch and transformers: {exc}; reinstall with scripts/setup.sh"
            ) from exc

        self.config = config
        self.source = _resolve_source(config.model)
        self.device = _resolve_device(config.device)
        self.dtype = _resolve_dtype(config.dtype, self.device)
        local_only = _offline() or Path(self.source).exists()

        try:
            model_config = AutoConfig.from_pretrained(self.source, local_files_only=local_only)
        except Exception as exc:  # OSError (missing), ValueError (unknown type), JSON errors...
            raise _load_error(self.source, "config", exc) from exc
        if model_config.model_type not in QWEN_VL_TYPES:
            raise PolicyError(
                f"model {self.source!r} is a {model_config.model_type!r} model; the transformers "
                f"backend runs {list(QWEN_VL_TYPES)} checkpoints. Serve other models with vLLM "
                "and use backend='openai'"
            )
        try:
            processor = AutoProcessor.from_pretrained(self.source, local_files_only=local_only)
        except Exception as exc:
            raise _load_error(self.source, "processor", exc) from exc
        self._check_grid(model_config, processor)
        try:
            model = AutoModelForImageTextToText.from_pretrained(
                self.source, dtype=self.dtype, local_files_only=local_only
            )
        except Exception as exc:
            raise _load_error(self.source, "weights", exc) from exc
        self.model = model.to(self.device).eval()
        self.processor = processor
        self._torch = torch
        self.last_inputs_info: dict[str, Any] = {}

    @classmethod
    def from_model(cls, model, processor, config: PolicyConfig | None = None) -> "TransformersPolicy":
        """Wrap a model already in memory (e.g. one being trained); it is used as is, on its own device."""
        import torch

        self = cls.__new__(cls)
        self.config = config or PolicyConfig(backend="transformers")
        self.source = getattr(model, "name_or_path", "") or "in-memory model"
        self.device = str(next(model.parameters()).device)
        self.dtype = next(model.parameters()).dtype
        self._check_grid(model.config, processor)
        self.model, self.processor, self._torch = model, processor, torch
        self.last_inputs_info = {}
        return self

    def _check_grid(self, model_config, processor) -> None:
        """Set `patch` from the vision config and check the processor snaps images to the same grid."""
        from agent.coords import resolve

        vision = model_config.vision_config
        self.patch = int(vision.patch_size) * int(vision.spatial_merge_size)  # 28 Qwen2.5-VL, 32 Qwen3-VL
        self.coords = resolve(self.config.coords, model_config.model_type)  # Qwen3-VL grounds in 0..1000
        if self.config.max_pixels < self.patch * self.patch:
            raise PolicyError(
                f"max_pixels={self.config.max_pixels} is below one {self.patch}x{self.patch} patch; "
                f"raise it to at least {self.patch * self.patch}"
            )
        image_proc = processor.image_processor
        proc_grid = int(image_proc.patch_size) * int(image_proc.merge_size)
        if proc_grid != self.patch:
            raise PolicyError(
                f"model {self.source!r} is inconsistent: its vision config snaps images to "
                f"{self.patch} px but its image processor to {proc_grid} px; fix "
                "patch_size/merge_size in the processor config to match config.json"
            )
        self._pixel_patch = int(image_proc.patch_size)

    # ---------------------------------------------------------------- inputs

    def image_size_kwargs(self) -> dict[str, int]:
        """The per-call processor size bounds: on-grid images pass unchanged, none exceeds max_pixels."""
        # smart_resize keeps an image whose sides are multiples of `patch` when its area lies within
        # [shortest_edge, longest_edge]; one merged patch is the smallest image the model can read.
        return {"shortest_edge": self.patch * self.patch, "longest_edge": int(self.config.max_pixels)}

    def prepare(self, messages: list[dict], thinking: bool | None = None):
        """Internal messages -> processor tensors on the model's device (also fills `last_inputs_info`).
        `thinking` goes to the chat template as `enable_thinking` (Qwen3's templates read it) when given."""
        if self.model is None:
            raise PolicyError("this transformers policy was closed; load a new one with load_policy(...)")
        chat, images = _split_images(messages, self.patch)
        try:
            extra = {} if thinking is None else {"enable_thinking": bool(thinking)}
            text = self.processor.apply_chat_template(chat, tokenize=False, add_generation_prompt=True, **extra)
        except Exception as exc:
            raise PolicyError(
                f"the chat template of {self.source!r} rejected the messages: {exc}; check roles and content parts"
            ) from exc
        kwargs: dict[str, Any] = {"text": [text], "return_tensors": "pt"}
        if images:
            kwargs.update(images=images, size=self.image_size_kwargs())
        try:
            inputs = self.processor(**kwargs).to(self.device)
        except ValueError as exc:  # e.g. an aspect ratio beyond 200:1, which smart_resize refuses
            raise PolicyError(
                f"the processor of {self.source!r} rejected the inputs: {exc}; re-render the "
                "offending image (crop it or pad it to a saner aspect ratio)"
            ) from exc
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(self.dtype)  # (patches, C*T*P*P)
        grid = inputs["image_grid_thw"].tolist() if "image_grid_thw" in inputs else []  # (images, 3)
        self.last_inputs_info = {
            "image_grid_thw": grid,
            "image_sizes": [list(im.size) for im in images],  # (width, height) as given
            "image_pixels": [h * w * self._pixel_patch**2 for _, h, w in grid],  # what the model saw
            "input_tokens": int(inputs["input_ids"].shape[1]),
        }
        return inputs

    # ---------------------------------------------------------------- generation

    def stream(self, messages: list[dict], view: Any = None) -> Iterator[str | Tokens]:
        from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

        torch = self._torch
        gen = getattr(view, "generation", None) or generation_settings(None, self.config)
        inputs = self.prepare(messages, gen.get("thinking"))
        tokenizer = self.processor.tokenizer
        streamer = TextIteratorStreamer(tokenizer, skip_prompt=True, skip_special_tokens=True)
        stop = threading.Event()

        class _StopWhenClosed(StoppingCriteria):
            # lets a consumer that stops reading (closed generator) end generation early
            def __call__(self, input_ids, scores, **kwargs):
                return stop.is_set()

        gen_kwargs: dict[str, Any] = dict(
            **inputs,
            streamer=streamer,
            max_new_tokens=int(gen["max_new_tokens"]),
            stopping_criteria=StoppingCriteriaList([_StopWhenClosed()]),
        )
        if self.model.generation_config.pad_token_id is None and tokenizer.pad_token_id is not None:
            gen_kwargs["pad_token_id"] = tokenizer.pad_token_id
        if gen["temperature"] > 0:
            # Qwen checkpoints ship top_k=1 / top_p=0.001 defaults that would make sampling greedy again, so
            # sample from the tempered distribution, cut only at the top_p the settings give (1.0 if none).
            top_p = float(gen.get("top_p") or 1.0)
            gen_kwargs.update(do_sample=True, temperature=float(gen["temperature"]), top_k=0, top_p=top_p)
            torch.manual_seed(int(self.config.seed))
        else:
            gen_kwargs["do_sample"] = False

        result: dict[str, Any] = {}

        def run() -> None:
            try:
                with torch.inference_mode():
                    result["sequences"] = self.model.generate(**gen_kwargs)  # (1, prompt + new)
            except BaseException as exc:  # noqa: BLE001 - surfaced in the caller's thread below
                result["error"] = exc
                streamer.end()  # unblock the consumer, which would otherwise wait forever

        thread = threading.Thread(target=run, name="transformers-generate", daemon=True)
        thread.start()
        try:
            for chunk in streamer:
                if chunk:
                    yield chunk
        finally:
            stop.set()
            thread.join()
        if "error" in result:
            exc = result["error"]
            raise PolicyError(f"generation with {self.source!r} failed: {type(exc).__name__}: {exc}") from exc
        new = result["sequences"][0, self.last_inputs_info["input_tokens"] :]  # (N,)
        self.last_inputs_info["output_tokens"] = int(new.shape[0])
        yield Tokens(new.tolist())  # the ids only: their log-probs would cost a second forward pass

    def generation(self, protocol: Any) -> dict[str, Any]:
        return generation_settings(protocol, self.config)

    def describe(self) -> str:
        dtype = str(self.dtype).removeprefix("torch.")
        return f"transformers {self.config.model} on {self.device} ({dtype})"

    def close(self) -> None:
        if getattr(self, "model", None) is None:
            return
        on_gpu = self.device.startswith("cuda")
        self.model = None
        self.processor = None
        if on_gpu:
            self._torch.cuda.empty_cache()


def _on_grid(image, patch: int, max_pixels: int | None):
    """The image snapped to the patch grid within its part's `max_pixels`, as a server honouring that field
    (DashScope) resizes it; on-grid images within budget pass unchanged, so the processor never resizes."""
    from PIL import Image

    from agent.media import model_view

    size = model_view(image.width, image.height, patch, max_pixels)
    return image if size == image.size else image.resize(size, Image.Resampling.BICUBIC)


def _split_images(messages: list[dict], patch: int = 28) -> tuple[list[dict], list]:
    """Replace each image part's PIL image by a bare {"type": "image"} and collect the images in order."""
    from PIL import Image

    chat, images = [], []
    for i, message in enumerate(messages):
        content = message.get("content", "")
        if isinstance(content, str):
            chat.append({"role": message["role"], "content": content})
            continue
        parts = []
        for j, part in enumerate(content):
            kind = part.get("type")
            if kind == "text":
                parts.append({"type": "text", "text": part["text"]})
            elif kind == "image":
                image = part.get("image")
                if not isinstance(image, Image.Image):
                    raise PolicyError(
                        f"message {i} part {j} ({part.get('ref', 'image')}) carries "
                        f"{type(image).__name__}, not a PIL image; the agent must render images "
                        "before calling the transformers backend"
                    )
                images.append(
                    _on_grid(image if image.mode == "RGB" else image.convert("RGB"), patch, part.get("max_pixels"))
                )
                parts.append({"type": "image"})
            else:
                raise PolicyError(
                    f"message {i} part {j} has type {kind!r}; the transformers backend reads "
                    "'text' and 'image' parts (send video key frames as images)"
                )
        chat.append({"role": message["role"], "content": parts})
    return chat, images
