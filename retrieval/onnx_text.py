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

Once the graph is cached, a plain text model in a local folder loads without torch or sentence-transformers
(`from_folder`): its tokenizer runs from the folder's `tokenizer.json` with sentence-transformers' settings
(truncation to `max_seq_length`, padding to the longest text), giving the same token ids, so the same vectors
(`tests/retrieval/test_onnx_text.py`). That takes a process's first encode from ~7 s of imports and loading to
~1 s, which every `vimrag index`, `search` and `serve-search` pays at its start.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
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


def plain_folder(folder: str | Path) -> dict[str, int] | None:
    """`{"max_length", "dim"}` for a local sentence-transformers folder whose pipeline is exactly transformer ->
    mean pooling (-> normalise), without prompts, read from its config files alone; None for anything else."""
    root = Path(folder)

    def read(name: str) -> Any:
        try:
            return json.loads((root / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    modules, st_cfg = read("modules.json"), read("sentence_bert_config.json")
    if not isinstance(modules, list) or not isinstance(st_cfg, dict) or not (root / "tokenizer.json").is_file():
        return None
    types = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if types not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]) or modules[0].get("path"):
        return None
    pooling = read(f"{modules[1].get('path', '')}/config.json") or {}
    flags = {k: v for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True}
    mean = pooling.get("pooling_mode") == "mean" or (
        not pooling.get("pooling_mode") and list(flags) == ["pooling_mode_mean_tokens"]
    )
    prompts = (read("config_sentence_transformers.json") or {}).get("prompts") or {}
    if not mean or any(prompts.values()) or st_cfg.get("do_lower_case") or not pooling.get("word_embedding_dimension"):
        return None
    return {"max_length": int(st_cfg.get("max_seq_length") or 512), "dim": int(pooling["word_embedding_dimension"])}


def folder_tokenizer(folder: str | Path) -> tuple[Any, dict[str, int]] | None:
    """`(tokenize, plain)` for a plain text model folder (`plain_folder`): `tokenize(texts)` gives the int64 arrays
    the transformer takes, with sentence-transformers' settings (truncation to `max_seq_length`, padding to the
    longest text), built from the folder's `tokenizer.json` without torch; None for a folder that is not plain."""
    from tokenizers import Tokenizer

    plain = plain_folder(folder)
    if plain is None:
        return None
    tok = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
    pad = tok.padding or {}
    pad_token = pad.get("pad_token", "[PAD]")
    # what sentence-transformers asks of the tokenizer: cut at max_seq_length, pad to the longest in the batch
    tok.enable_truncation(max_length=plain["max_length"], strategy="longest_first")
    tok.enable_padding(
        pad_id=tok.token_to_id(pad_token) or 0, pad_type_id=pad.get("pad_type_id", 0), pad_token=pad_token
    )

    def tokenize(texts: list[str]) -> dict[str, np.ndarray]:
        enc = tok.encode_batch(texts)
        return {
            "input_ids": np.array([e.ids for e in enc], dtype=np.int64),  # (b, seq)
            "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),  # (b, seq)
            "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),  # (b, seq)
        }

    return tokenize, plain


def from_folder(folder: str | Path, threads: int | None = None) -> OnnxTextEncoder | None:
    """The encoder of a plain text model folder (`plain_folder`) whose graph is already cached, built without
    torch or sentence-transformers; None when the ONNX backend is not wanted, the folder is not plain, or the graph
    is not exported yet (the caller loads the model, which exports it)."""
    weights = Path(folder) / "model.safetensors"
    found = folder_tokenizer(folder) if wanted() and weights.is_file() and graph_path(weights).is_file() else None
    if found is None:
        return None
    tokenize, plain = found
    return OnnxTextEncoder(tokenize, graph_path(weights), threads, dim=plain["dim"])


class PlainTextEncoder:
    """Transformer -> mean pooling -> normalise over tokenized batches; a subclass runs the transformer
    (`_hidden`). Encodes texts like `SentenceTransformer.encode(..., normalize_embeddings=True)`."""

    RUN_BATCH = 32  # texts per run; a caller's larger batch is cut into runs of this size
    dim: int | None = None

    def __init__(self, tokenize: Any) -> None:
        self._tokenize = tokenize

    def _hidden(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        """(b, seq, dim) float32 token states."""
        raise NotImplementedError

    def _feed(self, enc: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """(n, dim) float32, L2-normalised. Runs are cut from texts sorted by length, so padding is small."""
        order = np.argsort([-len(t) for t in texts], kind="stable")
        step = max(1, min(batch_size, self.RUN_BATCH))
        out: np.ndarray | None = None
        for s in range(0, len(texts), step):
            rows = order[s : s + step]
            feed = self._feed(self._tokenize([texts[i] for i in rows]))
            hidden = self._hidden(feed)  # (b, seq, dim)
            mask = feed["attention_mask"][..., None].astype(np.float32)  # (b, seq, 1)
            vecs = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)  # (b, dim)
            if out is None:
                out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float32)
            out[rows] = vecs
        assert out is not None, "encode() needs at least one text"
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


class OnnxTextEncoder(PlainTextEncoder):
    """Encodes texts like `SentenceTransformer.encode(..., normalize_embeddings=True)`, through ONNX Runtime.
    `tokenize` turns a batch of texts into int64 arrays (`for_model` uses the model's own tokenizer)."""

    def __init__(self, tokenize: Any, path: Path, threads: int | None = None, dim: int | None = None) -> None:
        import onnxruntime as ort

        super().__init__(tokenize)
        self.dim = dim
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

    @classmethod
    def for_model(cls, model: Any, weights: Path, threads: int | None = None) -> OnnxTextEncoder:
        """The encoder of a loaded sentence-transformers `model`, exporting its graph first if not cached; tokens
        come from the model's own tokenizer (`preprocess`)."""

        def tokenize(texts: list[str]) -> dict[str, np.ndarray]:
            return {k: v.numpy().astype(np.int64) for k, v in model.preprocess(texts).items() if hasattr(v, "numpy")}

        return cls(tokenize, _exported(model, weights), threads)

    # Texts per run. 400 dev passages on 2 cores: 6.4 s at 1, 2 or 4, 7.0 s at 8, 7.7 s at 32, 8.5 s at 64
    # (larger batches outgrow the cache); a caller's larger batch is cut into runs of this size.
    RUN_BATCH = 4

    def _feed(self, enc: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: v for k, v in super()._feed(enc).items() if k in self._inputs}

    def _hidden(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        return self._session.run(None, feed)[0]  # (b, seq, dim)


def graph_path(weights: Path) -> Path:
    """Where the graph of `weights` is cached: keyed by the weights file and the installed torch (which exports
    it), read from the package metadata so that finding the graph needs no torch import."""
    st = weights.stat()
    key = f"{weights.resolve()}|{st.st_size}|{st.st_mtime_ns}|{importlib.metadata.version('torch')}"
    return cache_dir() / "onnx" / f"{weights.parent.name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.onnx"


def _exported(model: Any, weights: Path) -> Path:
    """The cached ONNX graph of `model`'s transformer, exported once (atomically: a crash leaves no half file)."""
    import torch

    class _Positional(torch.nn.Module):  # the exporter passes inputs by position; the model wants names
        def __init__(self, inner: Any, names: list[str]) -> None:
            super().__init__()
            self.inner, self.names = inner, names

        def forward(self, *inputs):
            return self.inner(**dict(zip(self.names, inputs))).last_hidden_state  # (batch, tokens, dim)

    path = graph_path(weights)
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
