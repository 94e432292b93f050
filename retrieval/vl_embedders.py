"""Chat-format vision-language embedders: GVE (Qwen2.5-VL) and Qwen3-VL-Embedding, one vector per input.

    gve:<id-or-path>           Alibaba-NLP/GVE-3B (2048-d) or Alibaba-NLP/GVE-7B (3584-d)
    qwen3vl-emb:<id-or-path>   Qwen/Qwen3-VL-Embedding-2B (2048-d) or Qwen/Qwen3-VL-Embedding-8B (4096-d)

(Dimensions: VRAG search_engine/search_engine_faiss.py:22-27, and the Model Specifications table of
github.com/QwenLM/Qwen3-VL-Embedding README.md. "VRAG" below is github.com/Alibaba-NLP/VRAG at 24f8d05.)

Both embed a text, a query, or one image (a page, a picture, a video keyframe) the same way: the input
becomes the user turn under a system prompt, the folder's own chat template adds the assistant prompt,
and the vector is the final hidden state of the last token, L2-normalised. The two differ in their
system prompts, their pixel budget per image, and GVE's extra <|endoftext|> after the prompt. Load
them with `retrieval.embedders.load_embedder("gve:...")`; the constants below cite where they come from.

Left out on purpose: whole-video inputs (ingest embeds a clip's keyframes one by one through
`encode_images`), mixed text+image inputs, Matryoshka truncation, and the checkpoints' remote code: the
weights load into transformers' own Qwen2.5-VL / Qwen3-VL classes, so no `trust_remote_code` is needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval.embedder_base import TorchEmbedder, batches, import_torch, normalize, rgb
from retrieval.embedder_specs import cached_file, from_pretrained
from retrieval.errors import RetrievalError, missing_dependency

if TYPE_CHECKING:
    from PIL import Image

# Both references cut whole prompts at 8192 tokens (GVE processor.py:18, qwen3_vl_embedding.py:24). Cutting the
# user text instead leaves room for the template and never drops the pooled last token.
MAX_TEXT_TOKENS = 8000
WHICH = (
    "gve: is for GVE (Alibaba-NLP/GVE-3B, GVE-7B; Qwen2.5-VL) and qwen3vl-emb: for Qwen3-VL-Embedding "
    "(Qwen/Qwen3-VL-Embedding-2B, -8B)"
)


def last_token(hidden: Any, mask: Any) -> Any:
    """Each row's hidden state at its last attended position, whether the batch is padded left or right.

    >>> import torch
    >>> h = torch.arange(6.0).reshape(2, 3, 1)  # (batch=2, seq=3, dim=1)
    >>> last_token(h, torch.tensor([[1, 1, 0], [0, 1, 1]])).flatten().tolist()  # right-padded, left-padded
    [1.0, 5.0]
    """
    torch = import_torch()
    positions = torch.arange(mask.shape[1], device=mask.device)  # (seq,)
    last = (mask.long() * positions).argmax(dim=1)  # (batch,) the largest attended position
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]  # (batch, dim)


class ChatVLEmbedder(TorchEmbedder):
    """A Qwen-VL model that embeds one chat turn as the last token's hidden state. Subclasses set the constants."""

    supports_images = True
    model_type: str  # config.json's model_type the weights must have
    model_class: str  # the transformers class the weights load into
    processor_class: str
    base_model: str  # where a missing chat template can be copied from
    doc_system: str  # system prompt for documents: passages, pages, images, video frames
    query_system: str  # system prompt for search queries
    suffix: str = ""  # appended to the rendered prompt, so its last token is the one pooled
    min_pixels: int  # per image, before patching; the processor snaps each side to its grid
    max_pixels: int

    def __init__(self, spec: str, ref: str, device: str) -> None:
        try:
            import transformers
        except ImportError as e:
            raise missing_dependency("transformers", purpose=f"the {spec!r} embedder") from e
        if not hasattr(transformers, self.model_class):
            raise RetrievalError(
                f"embedder {spec!r} needs transformers' {self.model_class}, which transformers "
                f"{transformers.__version__} lacks; run: pip install -U transformers"
            )
        super().__init__(spec, device)
        self._check_model_type(ref)
        self.model = self._load_model(getattr(transformers, self.model_class), ref).to(device).eval()
        self.processor = from_pretrained(getattr(transformers, self.processor_class), ref, spec)
        # Right padding as in GVE processor.py:16 and qwen3_vl_embedding.py:188; `last_token` reads the mask anyway.
        self.processor.tokenizer.padding_side = "right"
        if not getattr(self.processor, "chat_template", None):
            raise RetrievalError(
                f"embedder {spec!r}: {ref} has no chat template (chat_template.jinja or "
                f"chat_template.json); copy the one of {self.base_model} into the folder"
            )
        self.dim = int(self.model.config.text_config.hidden_size)

    def _check_model_type(self, ref: str) -> None:
        config = cached_file(ref, "config.json")
        if config is None:  # not here (yet): from_pretrained says what to do
            return
        try:
            found = json.loads(Path(config).read_text()).get("model_type")
        except (OSError, ValueError):
            return
        if found != self.model_type:
            raise RetrievalError(
                f"embedder {self.spec!r}: {ref} holds a {found!r} model, not {self.model_type!r}; {WHICH}"
            )

    def _load_model(self, cls: Any, ref: str) -> Any:
        return from_pretrained(cls, ref, self.spec, dtype=self.dtype)

    # ------------------------------------------------------------------------------------------ prompts
    def _conversations(self, system: str, parts: list[dict]) -> list[str]:
        """The rendered prompt of each part (a text or an image placeholder) under `system`."""
        if not parts:
            return []
        conversations = [
            [{"role": "system", "content": [{"type": "text", "text": system}]}, {"role": "user", "content": [part]}]
            for part in parts
        ]
        prompts = self.processor.apply_chat_template(conversations, tokenize=False, add_generation_prompt=True)
        return [p + self.suffix for p in prompts]

    def prompts(self, texts: list[str], query: bool = False) -> list[str]:
        """The exact prompts `texts` are embedded with: as documents, or as search queries."""
        tok = self.processor.tokenizer
        ids = tok(list(texts), add_special_tokens=False)["input_ids"] if texts else []
        texts = [t if len(i) <= MAX_TEXT_TOKENS else tok.decode(i[:MAX_TEXT_TOKENS]) for t, i in zip(texts, ids)]
        return self._conversations(
            self.query_system if query else self.doc_system, [{"type": "text", "text": t} for t in texts]
        )

    def image_prompts(self, n: int, query: bool = False) -> list[str]:
        return self._conversations(self.query_system if query else self.doc_system, [{"type": "image"}] * n)

    # ------------------------------------------------------------------------------------------ model
    def inputs(self, prompts: list[str], images: list | None = None) -> dict:
        """Processor output for prompts (and the images their placeholders stand for), at this model's pixel budget."""
        pixels = {"size": {"shortest_edge": self.min_pixels, "longest_edge": self.max_pixels}} if images else {}
        return self.processor(text=prompts, images=images or None, padding=True, return_tensors="pt", **pixels)

    def _embed(self, prompts: list[str], images: list | None = None) -> np.ndarray:
        torch = import_torch()
        enc = self.inputs(prompts, images)
        moved = self.to_device(enc, skip=())
        with torch.inference_mode():
            hidden = self.model(**moved).last_hidden_state  # (batch, seq, dim)
            vecs = last_token(hidden, moved["attention_mask"])  # (batch, dim)
        return normalize(vecs.float().cpu().numpy())

    def _texts(self, texts: list[str], query: bool, batch_size: int) -> np.ndarray:
        if not texts:
            return self._empty()
        what = "queries" if query else "texts"
        return np.concatenate(
            [
                self._embed(self.prompts(batch, query))
                for batch in batches(texts, batch_size, f"embedding {what} ({self.spec})")
            ]
        )

    def _images(self, images: list, query: bool, batch_size: int) -> np.ndarray:
        images = rgb(list(images))
        if not images:
            return self._empty()
        return np.concatenate(
            [
                self._embed(self.image_prompts(len(batch), query), batch)
                for batch in batches(images, batch_size, f"embedding images ({self.spec})")
            ]
        )

    def encode_texts(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        return self._texts(list(texts), False, batch_size)

    def encode_queries(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        return self._texts(list(texts), True, batch_size)

    def encode_images(self, images: list[Image.Image], batch_size: int = 8) -> np.ndarray:
        return self._images(images, False, batch_size)

    def encode_image_queries(self, images: list[Image.Image], batch_size: int = 8) -> np.ndarray:
        return self._images(images, True, batch_size)


class GVEEmbedder(ChatVLEmbedder):
    """GVE, a Qwen2.5-VL tuned for universal video retrieval (Alibaba-NLP/GVE-3B, GVE-7B).

    Queries and documents share one prompt, as in VRAG's GVE search engine, so an index built here embeds
    like theirs. (MTEB's GVE wrapper instead puts a task instruction in the query's system turn.)
    """

    model_type = "qwen2_5_vl"
    model_class = "Qwen2_5_VLForConditionalGeneration"
    processor_class = "Qwen2_5_VLProcessor"
    base_model = "Qwen/Qwen2.5-VL-7B-Instruct"
    # VRAG search_engine/search_engine_faiss.py:165-170 (documents) and 259-267 (queries): a lone user turn, so the
    # Qwen2.5-VL template's default system prompt frames both; it is written out here so every template agrees.
    doc_system = query_system = "You are a helpful assistant."
    # VRAG search_engine/models/GVE/qwen25vl/qwen25vl_processor.py:46,168-174: <|endoftext|> closes every prompt;
    # models/GVE/models.py:38-39,140-146 and model_utils.py:139-146 pool that last token and normalise it.
    suffix = "<|endoftext|>"
    min_pixels, max_pixels = 4 * 28 * 28, 256 * 28 * 28  # VRAG search_engine/models/GVE/processor.py:7-12

    def _load_model(self, cls: Any, ref: str) -> Any:
        # The checkpoint is a Qwen2_5_VLForConditionalGeneration with no extra weights (GVE qwen25vl_model.py:48);
        # keep its Qwen2_5_VLModel and let the unused LM head go.
        return super()._load_model(cls, ref).model


class Qwen3VLEmbedder(ChatVLEmbedder):
    """Qwen3-VL-Embedding (Qwen/Qwen3-VL-Embedding-2B, -8B): instruction-aware, so queries get their own prompt."""

    model_type = "qwen3_vl"
    model_class = "Qwen3VLModel"  # the checkpoint holds a bare Qwen3VLModel (qwen3_vl_embedding.py:42-50)
    processor_class = "Qwen3VLProcessor"
    base_model = "Qwen/Qwen3-VL-8B-Instruct"
    # The query instruction of the Quick Start in github.com/QwenLM/Qwen3-VL-Embedding README.md (Usage);
    # documents get the default instruction, VRAG search_engine/models/Qwen3_VL_Embedding/qwen3_vl_embedding.py:170,239.
    query_system = "Retrieve images or text relevant to the user's query."
    doc_system = "Represent the user's input."
    # qwen3_vl_embedding.py:330-331 (generation prompt), 364-370 (last attended token), 389-391 (normalise): no suffix.
    min_pixels, max_pixels = 4 * 32 * 32, 1800 * 32 * 32  # qwen3_vl_embedding.py:25-28
