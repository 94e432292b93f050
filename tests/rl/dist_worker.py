"""Gradients of one GGPO update on fixed segments, for the distributed-equivalence test.

    python tests/rl/dist_worker.py MODEL_DIR OUT.pt                     # one process, the whole batch
    torchrun --nproc_per_node 2 tests/rl/dist_worker.py MODEL_DIR OUT.pt  # two processes (gloo), half each

Writes the flattened gradient (rank 0) to OUT.pt.
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


def main() -> None:
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    from rl.update import TrainConfig, compute_gradients

    model_dir, out = sys.argv[1], sys.argv[2]
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
    grads = torch.cat([p.grad.flatten() for p in acc.unwrap_model(model).parameters() if p.grad is not None])
    if acc.is_main_process:
        torch.save(grads, out)
    acc.wait_for_everyone()


if __name__ == "__main__":
    main()
