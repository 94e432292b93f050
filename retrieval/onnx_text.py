"""A sentence-transformers text model (transformer, mean pooling, normalise) run by ONNX Runtime on the CPU.

The default on a CPU for MiniLM and other plain text models; `VIMRAG_TEXT_BACKEND=torch` keeps torch. Same vectors
as torch (cosine >= 0.99999; `tests/retrieval/test_onnx_text.py`), so an index built with either backend answers
queries embedded by the other. Measured on this project's quiet 2-core box (AMD EPYC), 400 dev passages:
torch 12.5 s against ONNX Runtime 8.2 s at batch 32, back to back in one process, and 6.4 s in runs of 4.
The whole dev corpus indexed in 341 s on torch against 235 s on ONNX Runtime, the export included
(`python -m eval.bench_ingest`, same run). An earlier session measured torch ahead on this box (7.6 s
against 11.3 s for 300 passages), so the figure is worth re-measuring on other CPUs. int8 weight
quantisation was no faster, and it moved some vectors to cosine 0.80.

The graph is exported from the loaded torch weights with torch's own exporter once per machine (seconds)
and cached under `$VIMRAG_CACHE` (default `~/.cache/vimrag`), keyed by the weights file, so nothing is
downloaded. A model whose pipeline is not plain transformer + mean pooling (+ normalise), that adds prompts,
or that runs on a GPU stays on torch, and so does any model whose export fails (with a warning).
"""

from __future__ import annotations

import hashlib
import os
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np

BACKEND_ENV = "VIMRAG_TEXT_BACKEND"
THREADS_ENV = "VIMRAG_TEXT_THREADS"  # ONNX Runtime's intra-op threads (default: all cores); the search server's
# workers set it to their share of the cores
CACHE_ENV = "VIMRAG_CACHE"
_EXPORT_LOCK = threading.Lock()


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "vimrag").expanduser()


def wanted() -> bool:
    """Whether the ONNX backend should be tried ($VIMRAG_TEXT_BACKEND: onnx, the default, or torch)."""
    choice = os.environ.get(BACKEND_ENV, "onnx").strip().lower() or "onnx"
    if choice not in ("onnx", "torch"):
        raise ValueError(f"${BACKEND_ENV}={choice!r}; use onnx (the default) or torch")
    return choice == "onnx"


def supported(model: Any) -> bool:
    """True for a sentence-transformers model that is exactly transformer -> mean pooling (-> normalise)."""
    names = [type(m).__name__ for m in model]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return False
    pooling = model[1].get_config_dict() if hasattr(model[1], "get_config_dict") else {}
    prompts = getattr(model, "prompts", None) or {}
    return (
        pooling.get("pooling_mode") == "mean"
        and not any(prompts.values())
        and hasattr(model[0], "auto_model")
        and str(model.device) == "cpu"
    )


class OnnxTextEncoder:
    """Encodes texts like `SentenceTransformer.encode(..., normalize_embeddings=True)`, through ONNX Runtime."""

    def __init__(self, model: Any, weights: Path, threads: int | None = None) -> None:
        import onnxruntime as ort

        self._model = model  # kept for its tokenizer (`preprocess`), so tokens match torch's exactly
        path = _exported(model, weights)
        opts = ort.SessionOptions()
        env = os.environ.get(THREADS_ENV, "").strip()
        if env and not env.isdigit():
            raise ValueError(f"${THREADS_ENV}={env!r} is not a thread count; set it to a number like 1")
        opts.intra_op_num_threads = threads or int(env or 0) or os.cpu_count() or 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Idle workers sleep instead of spinning: reading (and OCR) runs beside the encoder in this process;
        # on the quiet box spinning gained nothing (11.2 s against 11.4 s for 300 passages).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.path = path

    # Texts per run. 400 dev passages on 2 cores: 6.4 s at 1, 2 or 4, 7.0 s at 8, 7.7 s at 32, 8.5 s at 64
    # (larger batches outgrow the cache); a caller's larger batch is cut into runs of this size.
    RUN_BATCH = 4

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """(n, dim) float32, L2-normalised. Runs are cut from texts sorted by length, so padding is small."""
        order = np.argsort([-len(t) for t in texts], kind="stable")
        step = max(1, min(batch_size, self.RUN_BATCH))
        out: np.ndarray | None = None
        for s in range(0, len(texts), step):
            rows = order[s : s + step]
            enc = self._model.preprocess([texts[i] for i in rows])
            feed = {
                k: enc[k].numpy().astype(np.int64)
                for k in ("input_ids", "attention_mask", "token_type_ids")
                if k in self._inputs and k in enc
            }
            hidden = self._session.run(None, feed)[0]  # (b, seq, dim)
            mask = feed["attention_mask"][..., None].astype(np.float32)  # (b, seq, 1)
            vecs = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)  # (b, dim)
            if out is None:
                out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float32)
            out[rows] = vecs
        assert out is not None, "encode() needs at least one text"
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def _exported(model: Any, weights: Path) -> Path:
    """The cached ONNX graph of `model`'s transformer, exported once (atomically: a crash leaves no half file)."""
    import torch

    class _Positional(torch.nn.Module):  # the exporter passes inputs by position; the model wants names
        def __init__(self, inner: Any, names: list[str]) -> None:
            super().__init__()
            self.inner, self.names = inner, names

        def forward(self, *inputs):
            return self.inner(**dict(zip(self.names, inputs))).last_hidden_state  # (batch, tokens, dim)

    st = weights.stat()
    key = hashlib.sha256(f"{weights.resolve()}|{st.st_size}|{st.st_mtime_ns}|{torch.__version__}".encode())
    path = cache_dir() / "onnx" / f"{weights.parent.name}-{key.hexdigest()[:16]}.onnx"
    with _EXPORT_LOCK:
        if path.is_file():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        sample = model.preprocess(["an example sentence", "two"])
        names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in sample]
        axes = {k: {0: "batch", 1: "tokens"} for k in names}
        axes["hidden"] = {0: "batch", 1: "tokens"}
        try:
            with torch.inference_mode(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # tracer notes on shape checks that hold for every input here
                torch.onnx.export(
                    _Positional(model[0].auto_model, names).eval(),
                    tuple(sample[k] for k in names),
                    str(tmp),
                    input_names=names,
                    output_names=["hidden"],
                    dynamic_axes=axes,
                    opset_version=17,
                    dynamo=False,
                )
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    return path
