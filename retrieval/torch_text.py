"""A plain sentence-transformers text model run on torch without sentence-transformers: bf16 autocast on a CPU.

The torch-bf16 route of retrieval/st_embedder.py for a plain model folder (transformer -> mean pooling ->
normalise, `onnx_text.plain_folder`): the folder's tokenizer with sentence-transformers' settings
(`onnx_text.folder_tokenizer`), the transformer through `transformers.AutoModel`, and the pooling in float32.
Importing sentence-transformers costs 5-6 s of a process's start on the 2-core box (7.7 s to load MiniLM through
it against 3.2 s for torch and transformers alone), which an ingest of a few hundred pages would pay once more
than its fp32 route on ONNX Runtime; the vectors are the same up to bf16 rounding (cosine >= 0.999, tested).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.onnx_text import PlainTextEncoder, folder_tokenizer

# Texts per forward pass under bf16 autocast. 160 dev pages on 2 cores (AMD EPYC, avx512_bf16): 3.7 s at 8,
# 4.1 s at 16 and 32, 4.2 s at 64.
BF16_BATCH = 8


class TorchTextEncoder(PlainTextEncoder):
    """Encodes like `SentenceTransformer.encode(..., normalize_embeddings=True)` on torch, under bf16 autocast
    when `bf16`."""

    def __init__(self, tokenize: Any, folder: str | Path, dim: int, bf16: bool = True) -> None:
        import torch
        from transformers import AutoModel

        super().__init__(tokenize)
        self._torch = torch
        self.model = AutoModel.from_pretrained(str(folder), local_files_only=True).eval()  # float32 weights
        self.dim, self.bf16 = dim, bf16
        self._inputs = set(inspect.signature(self.model.forward).parameters)  # read once, not per batch
        if bf16:
            self.RUN_BATCH = BF16_BATCH

    @classmethod
    def from_folder(cls, folder: str | Path, bf16: bool = True) -> TorchTextEncoder | None:
        """The encoder of a plain text model folder, or None for a folder that is not plain."""
        found = folder_tokenizer(folder)
        if found is None:
            return None
        tokenize, plain = found
        return cls(tokenize, folder, plain["dim"], bf16)

    def _feed(self, enc: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: v for k, v in super()._feed(enc).items() if k in self._inputs}

    def _hidden(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        torch = self._torch
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            out = self.model(**{k: torch.from_numpy(v) for k, v in feed.items()})
        return out.last_hidden_state.float().numpy()  # (b, seq, dim)
