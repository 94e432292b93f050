"""Gradients of one GGPO update on fixed segments, for the distributed-equivalence test.

    torchrun --nproc_per_node 2 tests/rl/dist_worker.py MODEL_DIR OUT.pt  # two processes (gloo), half each

Writes the flattened gradient (rank 0) to OUT.pt. The one-process reference is `gradients(MODEL_DIR)`, called in
the test's own process.
"""

import sys

import torch


def segments(vocab: int, n: int = 4):
    from rl.policy import Segment

    g = torch.Generator().manual_seed(123)
    out = []
    for i in range(n):
        p, m = 10 + 3 * i, 4 + 2 * i  # different prompt and generation lengths
        ids = torch.randint(10, vocab, (1, p), generator=g)  # (1, P)
        gen = torch.randint(10, vocab, (m,), generator=g)  # (M,)
        old = -torch.rand(m, generator=g) * 3  # (M,)
        out.append(Segment(i + 1, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}, gen, old))
    return out


def gradients(model_dir: str):
    """(this process's Accelerator, the flattened gradient of its share of the segments, summed over processes)."""
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    from rl.update import TrainConfig, compute_gradients

    acc = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    model = acc.prepare(model)
    segs = segments(model.config.vocab_size if hasattr(model, "config") else acc.unwrap_model(model).config.vocab_size)
    advs = [1.0, -0.5, 0.8, -1.2]
    weights = [1.0, 0.0, 1.0, 1.0]  # one masked step
    mine = list(range(acc.process_index, len(segs), acc.num_processes))
    cfg = TrainConfig(model="m", dataset="d", method="ggpo", level="token", length_norm="token_mean")
    compute_gradients(acc, model, [segs[i] for i in mine], [advs[i] for i in mine], [weights[i] for i in mine], cfg)
    return acc, torch.cat([p.grad.flatten() for p in acc.unwrap_model(model).parameters() if p.grad is not None])


def main() -> None:
    acc, grads = gradients(sys.argv[1])
    if acc.is_main_process:
        torch.save(grads, sys.argv[2])
    acc.wait_for_everyone()


if __name__ == "__main__":
    main()
