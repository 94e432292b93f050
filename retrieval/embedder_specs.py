"""Embedder specs, and finding a model's weights without downloading them.

A spec is `kind` or `kind:<id-or-path>` (the kinds and examples are listed in `retrieval/embedders.py`).
`canonical_spec` is what an index stores: local folders become absolute paths, hub ids stay as given.
`from_pretrained` loads from a local folder or the Hugging Face cache, and when the weights are in
neither, says how to fetch them where there is internet and bring them here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrieval.errors import RetrievalError

KINDS = ("minilm", "st", "clip", "siglip", "colqwen2", "gve", "qwen3vl-emb")
EXAMPLES = (
    "minilm",
    "st:<id-or-path>",
    "clip:openai/clip-vit-base-patch32",
    "siglip:<id-or-path>",
    "colqwen2:vidore/colqwen2-v1.0-hf",
    "gve:Alibaba-NLP/GVE-3B",
    "qwen3vl-emb:Qwen/Qwen3-VL-Embedding-2B",
)


def parse_spec(spec: str) -> tuple[str, str]:
    """Split a spec into (kind, model_ref). `minilm` has an empty ref; the others need one.

    >>> parse_spec("clip:openai/clip-vit-base-patch32")
    ('clip', 'openai/clip-vit-base-patch32')
    >>> parse_spec("minilm")
    ('minilm', '')
    """
    if not isinstance(spec, str) or not spec.strip():
        raise RetrievalError(f"embedder spec {spec!r} is empty; use one of {', '.join(EXAMPLES)}")
    spec = spec.strip()
    kind, sep, ref = spec.partition(":")  # first colon only, so "clip:C:\\models\\clip" keeps its drive letter
    kind = kind.strip().lower()
    ref = ref.strip()
    if kind not in KINDS:
        raise RetrievalError(
            f"unknown embedder kind {kind!r} in spec {spec!r}; choose one of {', '.join(KINDS)} "
            f"(examples: {', '.join(EXAMPLES)})"
        )
    if kind == "minilm":
        if ref:
            raise RetrievalError(
                f"spec {spec!r}: minilm takes no model reference; write 'minilm', or "
                f"'st:{ref}' for another sentence-transformers model"
            )
        return kind, ""
    if not ref:
        raise RetrievalError(f"spec {spec!r} names no model; write {kind}:<hugging-face-id-or-local-folder>")
    return kind, ref


def canonical_spec(spec: str) -> str:
    """The spec as stored in an index: local folders become absolute paths, hub ids stay as given."""
    kind, ref = parse_spec(spec)
    return kind if kind == "minilm" else f"{kind}:{_resolve_ref(ref, spec)}"


def _looks_like_path(ref: str) -> bool:
    # Hub ids are "name" or "org/name"; anything else with a separator is meant as a folder.
    return (
        ref.startswith(("/", "./", "../", "~", ".\\"))
        or "\\" in ref
        or ref.count("/") > 1
        or (len(ref) > 1 and ref[1] == ":")
    )


def _resolve_ref(ref: str, spec: str) -> str:
    path = Path(ref).expanduser()
    if path.exists():
        if not path.is_dir():
            raise RetrievalError(f"spec {spec!r}: {path} is a file; pass the model folder that holds config.json")
        return str(path.resolve())
    if _looks_like_path(ref):
        raise RetrievalError(f"spec {spec!r}: model folder {path} does not exist; check the path")
    return ref


def is_offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def cached_file(ref: str, filename: str) -> str | None:
    """Path of `filename` in a local folder or in the cached snapshot of a hub id; None if absent (never downloads)."""
    if Path(ref).is_dir():
        path = Path(ref) / filename
        return str(path) if path.is_file() else None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(ref, filename)
    except Exception:  # noqa: BLE001 - malformed ids and cache quirks just mean "not known to be there"
        return None
    return found if isinstance(found, str) else None


def has_file(ref: str, filename: str) -> bool:
    return cached_file(ref, filename) is not None


def is_colpali_engine_checkpoint(ref: str) -> bool:
    """colpali-engine repos (vidore/colqwen2-v1.0) hold a PEFT adapter, not a `colqwen2` transformers model."""
    if not has_file(ref, "adapter_config.json"):
        return False
    config = cached_file(ref, "config.json")
    if config is None:
        return True
    import json

    try:
        return json.loads(Path(config).read_text()).get("model_type") != "colqwen2"
    except (OSError, ValueError):
        return True


def _not_available(spec: str, ref: str, cause: Exception | None = None) -> RetrievalError:
    why = f" ({type(cause).__name__}: {str(cause).splitlines()[0][:200]})" if cause else ""
    where = "here (HF_HUB_OFFLINE=1)" if is_offline() else "here (the Hub is unreachable or has no such model)"
    return RetrievalError(
        f"embedder {spec!r}: model {ref!r} is not a local folder and is not in the Hugging Face cache, and weights "
        f"cannot be downloaded {where}{why}. Download it where there is internet "
        f"(`hf download {ref} --local-dir DIR`), copy DIR here and pass the folder: "
        f"{spec.split(':', 1)[0]}:DIR"
    )


def from_pretrained(loader: Any, ref: str, spec: str, **kwargs: Any) -> Any:
    """`loader.from_pretrained(ref)` with the offline case turned into an error that says what to do."""
    local = Path(ref).is_dir()
    if not local and is_offline() and not has_file(ref, "config.json") and not has_file(ref, "modules.json"):
        raise _not_available(spec, ref)
    try:
        return loader.from_pretrained(ref, **kwargs)
    except OSError as e:  # transformers reports missing files, repos and connections as OSError
        if local:
            raise RetrievalError(f"embedder {spec!r}: cannot load {ref}: {e}") from e
        raise _not_available(spec, ref, e) from e
