"""A real-size check of `vimrag train`: a randomly initialised model of Qwen2.5-VL-7B's published shape.

    python -m rl.bench_real_size --out runs/real_size                       # on one GPU: 3 updates, a few minutes
    python -m rl.bench_real_size --out /tmp/rs --scale 0.02 --device cpu    # a dry run of the script itself

No weights can be downloaded here, but everything except what the weights know runs at full size: the model's
shapes (`QWEN2_5_VL_7B`, the values of the published config.json), LoRA r=64 on the attention projections, bf16,
the vimrag protocol on the bundled corpus, and the 7B config's generation budget (1,024 new tokens a step; a
random model never stops early, so every step generates all of them). It prints and saves (OUT/real_size.json)
the peak GPU memory, generated tokens per second and seconds per update, for rl/RESULTS.md.

Left out on purpose: several GPUs and a vLLM server (one GPU, local rollouts), and any claim about what the
model learns. `--scale` shrinks every width and depth for a dry run on CPU; its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

# Qwen/Qwen2.5-VL-7B-Instruct config.json (the published values; transformers' Qwen2_5_VLConfig names)
QWEN2_5_VL_7B = {
    "text": dict(
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        vocab_size=152064,
        max_position_embeddings=128000,
        rms_norm_eps=1e-6,
        rope_theta=1_000_000.0,
        mrope_section=[16, 24, 24],
    ),
    "vision": dict(
        depth=32,
        hidden_size=1280,
        intermediate_size=3420,
        num_heads=16,
        out_hidden_size=3584,
        patch_size=14,
        spatial_merge_size=2,
        temporal_patch_size=2,
        window_size=112,
        fullatt_block_indexes=[7, 15, 23, 31],
        tokens_per_second=2,
    ),
}


def shape(scale: float = 1.0) -> dict:
    """The 7B's shape, or every width and depth times `scale` (heads kept whole, head_dim kept at 128 / scale's
    multiple of 16 so that M-RoPE's sections still sum to half of it).

    >>> s = shape()
    >>> s["text"]["hidden_size"] // s["text"]["num_attention_heads"], sum(s["text"]["mrope_section"])   # head_dim 128
    (128, 64)
    >>> t = shape(0.02)["text"]
    >>> t["hidden_size"] // t["num_attention_heads"], sum(t["mrope_section"]) * 2, t["num_hidden_layers"]
    (16, 16, 1)
    """
    if scale >= 1.0:
        return {k: dict(v) for k, v in QWEN2_5_VL_7B.items()}
    t, v = dict(QWEN2_5_VL_7B["text"]), dict(QWEN2_5_VL_7B["vision"])
    heads = max(2, int(t["num_attention_heads"] * scale))
    kv = 2 if heads % 2 == 0 else 1
    t.update(
        num_attention_heads=heads,
        num_key_value_heads=kv,
        hidden_size=heads * 16,
        intermediate_size=heads * 32,
        num_hidden_layers=max(1, int(t["num_hidden_layers"] * scale)),
        mrope_section=[2, 3, 3],
    )
    depth = max(2, int(v["depth"] * scale))
    v.update(depth=depth, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=t["hidden_size"])
    v["fullatt_block_indexes"] = [depth - 1]
    return {"text": t, "vision": v}


def build(path: Path, scale: float, device: str):
    """Write a random model of `shape(scale)` into `path` (with a small trained tokenizer: ids stay in range)."""
    import torch
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    from rl.tiny import _token_ids, _write_folder, qwen_vl_token_ids, train_tokenizer

    s = shape(scale)
    tok = train_tokenizer()
    text_ids, top_ids = qwen_vl_token_ids(_token_ids(tok))
    text = dict(s["text"])
    rope = {"rope_type": "default", "rope_theta": text.pop("rope_theta"), "mrope_section": text.pop("mrope_section")}
    config = Qwen2_5_VLConfig(
        text_config=dict(**text, **text_ids, rope_parameters=rope), vision_config=s["vision"], **top_ids
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2_5_VLForConditionalGeneration(config).to(torch.bfloat16).eval()
    grid = dict(patch_size=14, merge_size=2, temporal_patch_size=2)
    return _write_folder(
        path,
        model,
        tok,
        Qwen2VLImageProcessor(**grid, min_pixels=256 * 28 * 28, max_pixels=512 * 28 * 28),
        Qwen2VLVideoProcessor(**grid),
        Qwen2_5_VLProcessor,
    )


def main(argv: list[str] | None = None) -> dict:
    import torch

    from agent.settings import AgentConfig
    from rl.config import TrainConfig
    from rl.trainer import Trainer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/real_size")
    ap.add_argument("--scale", type=float, default=1.0, help="shrink the model for a dry run (e.g. 0.02 on CPU)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=1024, help="the 7B config's budget per step")
    a = ap.parse_args(argv)
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no GPU here: run on one, or dry-run with --scale 0.02 --device cpu")
    out = Path(a.out)
    t0 = time.perf_counter()
    model = build(out / "model", a.scale, a.device)
    built_s = time.perf_counter() - t0
    if a.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    cfg = TrainConfig(
        model=str(model),
        dataset="demo",
        agent=AgentConfig(protocol="vimrag", max_steps=2),
        method="ggpo",
        group_size=2,
        questions_per_update=1,
        updates=a.updates,
        lr=1e-6,
        max_new_tokens=a.max_new_tokens,
        mixed_precision="bf16" if a.device == "cuda" else "no",
        lora={"r": 64, "alpha": 128, "dropout": 0.05, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]},
        save_every=0,
        output_dir=str(out / "run"),
        resume=False,
        log_with=[],
    )
    cfg.validate()
    logs = Trainer(cfg).train(progress=True)
    result = {
        "device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu",
        "scale": a.scale,
        "build_s": round(built_s, 1),
        "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if a.device == "cuda" else None,
        "tokens_per_s": round(sum(lg["tokens"] for lg in logs) / sum(lg["rollout_s"] for lg in logs), 2),
        "s_per_update": [round(lg["rollout_s"] + lg["update_s"], 1) for lg in logs],
        "tokens_per_update": [lg["tokens"] for lg in logs],
    }
    (out / "real_size.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
