"""Which number format a CPU model path computes in: fp32, or bf16 where the processor has it natively.

`python -m retrieval.show_precision` prints this CPU, its bf16 flags and the choices cached for it (`--measure`:
measure MiniLM's candidates again).

The setting is `auto` (the default), `fp32` or `bf16`, from `$VIMRAG_PRECISION` or a caller (the CLI's
`--precision`). `auto` never picks bf16 on a CPU without a native bf16 instruction (x86 `avx512_bf16` or
`amx_bf16`, Arm `bf16`): there torch emulates it, slower than fp32. On a CPU with one, it measures once per
machine and model: a short timed encode in each candidate (ONNX Runtime fp32, torch fp32, torch bf16 under
`torch.autocast`), separately for a batch of passages (ingest) and for single queries (search), checks that
each candidate's vectors agree with torch fp32's (cosine >= `MIN_COSINE`), and keeps the fastest that agrees
and beats the fastest fp32 one by `MARGIN`, else the fp32 one. The choice is cached beside the ONNX export with
the CPU's name and flags, and logged with its reason. int8 is not a candidate: weight quantisation of MiniLM
was no faster here and moved some vectors to cosine 0.80 (retrieval/onnx_text.py).

Measured on an AMD EPYC with avx512_bf16 (no AMX), 160 dev pages at 2 threads: torch fp32 7.2 s, ONNX Runtime
fp32 6.6-7.2 s, torch bf16 autocast 3.7 s at batch 8 (cosine to fp32 >= 0.99996); the weights cast to bf16
outright were no faster and fell to cosine 0.998, so only autocast is offered.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

ENV = "VIMRAG_PRECISION"
SETTINGS = ("auto", "fp32", "bf16")
# Instruction-set flags (/proc/cpuinfo) under which bf16 matrix products run natively: AVX-512 BF16 and AMX on
# x86 (oneDNN's avx512_core_bf16 and amx kernels), the BF16 extension on Arm.
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16", "svebf16"})
SHOWN_FLAGS = BF16_FLAGS | {"avx512f", "avx512_vnni", "avx_vnni", "amx_tile", "amx_int8", "avx2", "fma", "asimd", "sve"}
MIN_COSINE = 0.999  # a candidate whose vectors fall below this against torch fp32 is never chosen
MARGIN = 1.10  # bf16 must be this much faster than the best fp32 candidate: a user without a gain keeps fp32
ROLES = ("documents", "queries")


def setting(explicit: str | None = None) -> str:
    """The precision asked for: `explicit` (a CLI flag), else $VIMRAG_PRECISION, else auto."""
    value = (explicit or os.environ.get(ENV, "") or "auto").strip().lower()
    if value not in SETTINGS:
        source = "--precision" if explicit else f"${ENV}"
        raise ValueError(f"{source}={value!r} is not a precision; use one of {', '.join(SETTINGS)}")
    return value


@dataclass(frozen=True)
class CpuReport:
    """The processor's model name and its instruction-set flags (empty where the OS does not say)."""

    name: str
    flags: frozenset[str] = frozenset()

    @property
    def bf16_native(self) -> bool:
        return bool(self.flags & BF16_FLAGS)

    def shown_flags(self) -> list[str]:
        return sorted(self.flags & SHOWN_FLAGS)


def cpu_report(cpuinfo: str | Path = "/proc/cpuinfo") -> CpuReport:
    """This machine's CPU, read from /proc/cpuinfo on Linux; elsewhere the name alone (no flags: no bf16)."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return CpuReport(platform.processor() or platform.machine() or "unknown CPU")
    name, flags = "", frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "hardware", "cpu model") and not name:
            name = value.strip()
        elif key in ("flags", "features") and not flags:  # x86 says flags, Arm says Features
            flags = frozenset(value.split())
    return CpuReport(name or platform.processor() or platform.machine() or "unknown CPU", flags)


@dataclass
class Choice:
    """What a model computes in, per role ("documents": ingest batches; "queries": one search at a time).
    Each value is a candidate name: "onnx-fp32", "torch-fp32" or "torch-bf16"."""

    documents: str
    queries: str
    reason: str
    cpu: str = ""
    flags: list[str] = field(default_factory=list)
    seconds: dict[str, dict[str, float]] = field(default_factory=dict)  # role -> candidate -> fastest time
    cosine: dict[str, float] = field(default_factory=dict)  # candidate -> min cosine to torch fp32

    def precision(self, role: str = "documents") -> str:
        return getattr(self, role).rpartition("-")[2]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Choice:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def fixed(asked: str, fp32: str, cpu: CpuReport | None = None) -> Choice | None:
    """The choice that needs no measurement, or None when `auto` must measure. `fp32` is the fp32 candidate the
    caller uses without measuring (ONNX Runtime where it is wanted, else torch)."""
    cpu = cpu or cpu_report()
    if asked == "fp32":
        return Choice(fp32, fp32, "fp32 was asked for", cpu.name, cpu.shown_flags())
    if asked == "bf16":
        reason = "bf16 was asked for" + ("" if cpu.bf16_native else " (this CPU has no native bf16: expect it slower)")
        return Choice("torch-bf16", "torch-bf16", reason, cpu.name, cpu.shown_flags())
    if not cpu.bf16_native:
        return Choice(fp32, fp32, "auto: this CPU has no native bf16 instruction", cpu.name, cpu.shown_flags())
    return None


def merge_precisions(*recorded: str) -> str:
    """The precisions an index's vectors hold, as recorded in its meta: "fp32", "bf16" or "bf16+fp32"."""
    return "+".join(sorted({p for r in recorded for p in r.split("+")} - {""}))


def choice_path(graph_key: Path, cpu: CpuReport | None = None, extra: str = "") -> Path:
    """Where a model's measured choice is cached: beside its ONNX graph, keyed by the CPU, the runtimes and
    `extra` (what else changes the candidates)."""
    cpu = cpu or cpu_report()
    parts = [cpu.name, ",".join(sorted(cpu.flags & SHOWN_FLAGS)), extra]
    for pkg in ("torch", "onnxruntime"):
        try:
            parts.append(importlib.metadata.version(pkg))
        except importlib.metadata.PackageNotFoundError:
            parts.append("-")
    digest = hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]
    return graph_key.with_name(f"{graph_key.stem}.precision-{digest}.json")


def load_choice(path: Path) -> Choice | None:
    try:
        return Choice.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def save_choice(path: Path, choice: Choice) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(choice.to_dict(), indent=2), encoding="utf-8")
    os.replace(tmp, path)


def sample_texts(n: int, words: int, seed: int = 0) -> list[str]:
    """`n` passages of about `words` English words each, the length ingest embeds (`passage_words`), so that the
    timed encode fills MiniLM's 256 tokens as dense pages do. Deterministic."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(max(1, words // 2), words)
        out.append(" ".join(rng.choice(_WORDS) for _ in range(k)).capitalize() + ".")
    return out


_WORDS = (
    "the annual report states that net revenue increased by percent compared with the previous fiscal year "
    "while operating costs were reduced through lower energy prices and a smaller workforce in the region "
    "table shows figures in millions of dollars except per share data for each quarter of the period under "
    "review including taxes interest depreciation and amortisation of intangible assets acquired in 2019 "
    "students survey respondents said they preferred online courses to lectures held on campus during winter"
).split()


def measure(
    candidates: dict[str, Callable[[list[str]], np.ndarray]],
    reference: str = "torch-fp32",
    rounds: int = 2,
    docs: list[str] | None = None,
    queries: list[str] | None = None,
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Time each candidate on a batch of passages and on single queries (warm-up first, then `rounds` alternating
    rounds; the fastest round counts) and measure its vectors' min cosine to `reference`'s."""
    docs = docs if docs is not None else sample_texts(16, 150)
    queries = queries if queries is not None else sample_texts(6, 12, seed=1)
    vecs = {name: np.vstack([fn(docs), *(fn([q]) for q in queries)]) for name, fn in candidates.items()}  # warm-up
    ref = vecs[reference]  # (n, dim)
    cosine = {name: float(np.min(np.sum(v * ref, axis=1))) for name, v in vecs.items()}
    seconds: dict[str, dict[str, float]] = {role: {} for role in ROLES}
    for _ in range(rounds):
        for name, fn in candidates.items():
            t = time.perf_counter()
            fn(docs)
            t_docs = time.perf_counter() - t
            t = time.perf_counter()
            for q in queries:
                fn([q])
            t_queries = time.perf_counter() - t
            for role, dt in (("documents", t_docs), ("queries", t_queries)):
                seconds[role][name] = min(dt, seconds[role].get(name, float("inf")))
    return seconds, cosine


def decide(seconds: dict[str, dict[str, float]], cosine: dict[str, float], cpu: CpuReport) -> Choice:
    """Per role, the fastest fp32 candidate, replaced by a bf16 one only where that agrees and is `MARGIN` faster."""
    picked, why = {}, []
    for role in ROLES:
        times = seconds[role]
        fp32 = min((n for n in times if n.endswith("fp32")), key=times.__getitem__)
        best = fp32
        for name in times:
            if name.endswith("bf16") and cosine.get(name, 0.0) >= MIN_COSINE and times[name] * MARGIN < times[best]:
                best = name
        picked[role] = best
        rejected = [n for n in times if cosine.get(n, 0.0) < MIN_COSINE]
        why.append(
            f"{role}: {best} ({' '.join(f'{n} {times[n]:.3f}s' for n in sorted(times))}"
            + (f"; {', '.join(rejected)} below cosine {MIN_COSINE}" if rejected else "")
            + ")"
        )
    return Choice(
        picked["documents"],
        picked["queries"],
        "auto, measured: " + "; ".join(why),
        cpu.name,
        cpu.shown_flags(),
        seconds,
        cosine,
    )
