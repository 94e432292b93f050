"""The embedder interface, and the helpers every model backend shares.

`Embedder` turns texts, queries and images into L2-normalised float32 vectors (one row per input, or one
(n_tokens, dim) matrix per input for multi-vector models). `TorchEmbedder` adds what a transformers model
run by us needs: bfloat16 (or float16) weights on a GPU, float32 on the CPU, inputs moved to its device.
The rest: picking a device, batching with a progress bar only when there are enough batches to watch
(`quiet()` turns them off for a block), and normalising outputs.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from retrieval.errors import RetrievalError, missing_dependency

if TYPE_CHECKING:
    from PIL import Image

PROGRESS_MIN_BATCHES = 5  # tqdm only when a call has more batches than this minus one; tiny calls stay quiet


class Embedder(ABC):
    """Turns texts, queries and images into L2-normalised float32 vectors.

    `encode_texts` embeds documents (passages); `encode_queries` embeds search queries, which some
    models treat differently (ColQwen2 adds a prefix and query-augmentation tokens; sentence-transformers
    models may have a query prompt). Multi-vector embedders return a list of (n_tokens_i, dim) arrays.
    """

    spec: str  # canonical spec stored in the index, e.g. "minilm", "clip:/abs/path", "colqwen2:vidore/colqwen2-v1.0-hf"
    dim: int
    multi_vector: bool = False
    supports_images: bool = False

    @abstractmethod
    def encode_texts(self, texts: list[str], batch_size: int = 32) -> np.ndarray | list[np.ndarray]:
        """Embed documents / passages."""

    @abstractmethod
    def encode_queries(self, texts: list[str], batch_size: int = 32) -> np.ndarray | list[np.ndarray]:
        """Embed search queries."""

    def encode_images(self, images: list["Image.Image"], batch_size: int = 8) -> np.ndarray | list[np.ndarray]:
        """Embed images. Text-only embedders raise NotImplementedError saying what to use instead."""
        raise NotImplementedError(
            f"embedder {self.spec!r} embeds text only and cannot embed images; index images through their "
            f"OCR text, or choose a visual embedder: clip:, siglip:, colqwen2:, gve: or qwen3vl-emb:<id-or-path>"
        )

    def encode_image_queries(self, images: list[Image.Image], batch_size: int = 8) -> np.ndarray | list[np.ndarray]:
        """Embed images used as search queries. Most models embed them like any image; instruction-tuned ones
        (qwen3vl-emb) frame a query differently from a document."""
        return self.encode_images(images, batch_size)

    def prepare(self, expected_texts: int | None = None) -> None:
        """Load what `encode_texts` runs on, where that loads lazily, so that ingest times it as model load;
        `expected_texts` is how many texts the caller expects to embed, where it knows."""
        return None

    def _empty(self) -> np.ndarray | list[np.ndarray]:
        return [] if self.multi_vector else np.zeros((0, self.dim), dtype=np.float32)

    def __repr__(self) -> str:
        kind = "multi-vector" if self.multi_vector else "single-vector"
        media = "text+image" if self.supports_images else "text"
        return f"{type(self).__name__}(spec={self.spec!r}, dim={self.dim}, {kind}, {media})"


class TorchEmbedder(Embedder):
    """A model run through torch: weights in bfloat16 (float16 where the GPU lacks it) on a GPU, float32 on the CPU."""

    def __init__(self, spec: str, device: str) -> None:
        self.spec = spec
        self.device = device
        self.dtype = gpu_dtype(device)

    def to_device(self, enc: Any, skip: tuple[str, ...] = ("token_type_ids",)) -> dict:
        """Processor output moved to the model's device, floating tensors cast to its dtype."""
        return {
            k: (v.to(self.device, self.dtype) if v.is_floating_point() else v.to(self.device))
            for k, v in enc.items()
            if k not in skip and hasattr(v, "to")
        }


def import_torch():
    try:
        import torch
    except ImportError as e:
        raise missing_dependency("torch", purpose="model embedders") from e
    return torch


def no_gpu_driver() -> bool:
    """True on a Linux machine with no NVIDIA or AMD GPU driver, where torch could see no GPU: the CPU is chosen
    without importing torch (about 2 s), so a process that embeds on ONNX Runtime never loads it."""
    gpu_paths = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/kfd")
    return sys.platform.startswith("linux") and not any(os.path.exists(p) for p in gpu_paths)


def pick_device(device: str | None) -> str:
    """The device an embedder runs on: `device` as given, or a CUDA GPU where torch sees one, else the CPU.

    A numbered CPU ("cpu:0", what `accelerate.PartialState().device` gives each rank of a CPU launch) is the CPU:
    the embedders' CPU routes (ONNX Runtime, the cached precision choice) key on "cpu".

    >>> pick_device("cpu:0"), pick_device("cpu")
    ('cpu', 'cpu')
    """
    if device and device.partition(":")[0] == "cpu":
        return "cpu"
    if not device and no_gpu_driver():
        return "cpu"
    torch = import_torch()
    if not device:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RetrievalError(
            f"device {device!r} was asked for but torch sees no CUDA GPU; pass device='cpu' "
            f"or leave it unset to pick one"
        )
    return device


def gpu_dtype(device: str):
    torch = import_torch()
    if not device.startswith("cuda"):
        return torch.float32
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def batches(items: list, batch_size: int, desc: str) -> Iterator[list]:
    """Slices of `items`; a tqdm bar only when there are enough batches to be worth watching."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    starts = range(0, len(items), batch_size)
    if show_progress(len(items), batch_size):
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc=desc, unit="batch")
    for s in starts:
        yield items[s : s + batch_size]


_QUIET = threading.local()


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No per-call progress bars inside this block (ingest draws one bar of its own for the whole run)."""
    from transformers.utils import logging as hf_logging

    before, hf_bars = getattr(_QUIET, "on", False), hf_logging.is_progress_bar_enabled()
    _QUIET.on = True
    hf_logging.disable_progress_bar()  # transformers' "Loading weights" bar while a model loads
    try:
        yield
    finally:
        _QUIET.on = before
        if hf_bars:
            hf_logging.enable_progress_bar()


def show_progress(n: int, batch_size: int) -> bool:
    return not getattr(_QUIET, "on", False) and -(-n // batch_size) >= PROGRESS_MIN_BATCHES


def normalize(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)  # (..., dim)
    norm = np.linalg.norm(x, axis=-1, keepdims=True)  # (..., 1)
    return x / np.maximum(norm, 1e-12)


def rgb(images: list) -> list:
    out = []
    for i, im in enumerate(images):
        if not hasattr(im, "convert"):
            raise TypeError(f"image {i} is a {type(im).__name__}, not a PIL image; open it with PIL.Image.open")
        out.append(im if im.mode == "RGB" else im.convert("RGB"))
    return out
