"""SFT steps per second of the gym's tiny LM in fp32 and under bf16 autocast, side by side in one run.

    python -m rl.bench_precision                     # the gym's tiny LM (hidden 128, 3 layers), 2 rounds
    python -m rl.bench_precision --hidden 512 --layers 6 --rounds 3

Each round runs `rl.sft.train_sft` on the same synthetic gym-like examples (a question, a page of text and a
`<search>` or `<answer>` reply, batch 16 as `rl.experiment` trains) from the same initial weights, once with
`mixed_precision: no` and once with `bf16`, alternating which goes first; the fastest round of each counts.
It prints steps/s, the ratio, and both runs' final losses (bf16 changes the numbers: rl/RESULTS.md's runs are
fp32 and reproduce bit for bit, a bf16 run reproduces only on the same CPU and library versions). The CPU's name
and its bf16 flags are printed with the figures (retrieval/precision.py): without native bf16, torch emulates it.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path


def examples(n: int, seed: int = 0) -> list:
    from retrieval.precision import sample_texts
    from rl.sft import Example

    rng = random.Random(seed)
    pages = sample_texts(n, 120, seed=seed)
    out = []
    for i, page in enumerate(pages):
        name = f"Tufo Misu {i}"
        reply = f"<search>{name}</search>" if rng.random() < 0.5 else f"<answer>{rng.randint(1000, 9999)}</answer>"
        user = f"Question: what is the access code of {name}?\n\nPage:\n{page}"
        out.append(Example([{"role": "user", "content": user}], reply, f"synthetic {i}"))
    return out


def run(model_dir: Path, exs: list, precision: str, out: Path, epochs: int, batch: int) -> tuple[float, float]:
    """(steps per second, final loss) of one SFT run."""
    from accelerate.state import AcceleratorState

    from rl.config import SFTConfig
    from rl.sft import train_sft

    AcceleratorState._reset_state(True)  # one Accelerator per process; each run asks for its own precision
    cfg = SFTConfig(
        "-",
        str(model_dir),
        str(out),
        epochs=epochs,
        lr=1e-3,
        grad_accum=1,
        batch_size=batch,
        seed=0,
        mixed_precision=precision,
    )
    t = time.perf_counter()
    hist = train_sft(cfg, examples=exs, progress=False)["history"]
    seconds = time.perf_counter() - t
    steps = epochs * -(-len(exs) // batch)
    return steps / seconds, hist[-1]["loss"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=128, help="hidden size (the gym's default, rl.experiment)")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--examples", type=int, default=96)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args(argv)

    import torch

    from retrieval.precision import BF16_FLAGS, cpu_report
    from rl.tiny import build_tiny_causal_lm

    cpu = cpu_report()
    print(
        f"CPU: {cpu.name}; bf16 flags: {', '.join(sorted(cpu.flags & BF16_FLAGS)) or 'none'}; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    exs = examples(a.examples)
    best: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_precision_") as tmp:
        base = build_tiny_causal_lm(
            Path(tmp) / "lm", seed=0, texts=[e.messages[0]["content"] for e in exs], hidden=a.hidden, layers=a.layers
        )
        for r in range(a.rounds):
            for precision in ("no", "bf16") if r % 2 == 0 else ("bf16", "no"):
                rate, loss = run(base, exs, precision, Path(tmp) / f"{precision}{r}", a.epochs, a.batch)
                print(f"round {r + 1}: {precision:>4}: {rate:.2f} steps/s, final loss {loss:.6f}", flush=True)
                if rate > best.get(precision, (0.0, 0.0))[0]:
                    best[precision] = (rate, loss)
    fp32, bf16 = best["no"], best["bf16"]
    print()
    print("| SFT, tiny LM | steps/s | vs fp32 | final loss |")
    print("|---|---:|---:|---:|")
    print(f"| fp32 | {fp32[0]:.2f} | 1.00x | {fp32[1]:.6f} |")
    print(f"| bf16 autocast | {bf16[0]:.2f} | {bf16[0] / fp32[0]:.2f}x | {bf16[1]:.6f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
