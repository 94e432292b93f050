"""Tiny random Qwen-VL and Qwen2 causal-LM folders for tests and CPU experiments: no download, a second to build.

    from rl.tiny import build_tiny_qwen2_5_vl, build_tiny_causal_lm
    path = build_tiny_qwen2_5_vl(tmp_path / "vlm")
    processor = AutoProcessor.from_pretrained(path)
    model = AutoModelForImageTextToText.from_pretrained(path)

Each builder writes a complete folder the way a real checkpoint ships it: `config.json` and random
weights, a byte-level BPE tokenizer trained here with the `tokenizers` library (700 tokens trained on
`_CORPUS` and the protocols' prompts unless a causal LM's caller gives its own texts; the Qwen special tokens
among them), a Qwen-style chat template, and the image and video processor configs. The weights come from a
fixed seed, so a folder built twice holds the same model.

What it leaves out on purpose: the model knows nothing (its text is gibberish), the tokenizer knows
only the English of `_CORPUS` and the protocols' prompts, and the chat template has no tool-calling or video
branches.
Use it to test plumbing (shapes, pixel budgets, streaming, masks, losses), never answer quality.

Grid facts the tests rely on: Qwen2.5-VL sees 14 px patches merged 2x2, so images snap to 28 px;
Qwen3-VL sees 16 px patches merged 2x2 and snaps to 32 px. `build_tiny_qwen3_vl` raises ImportError
on a transformers without Qwen3-VL; check `importlib.util.find_spec("transformers.models.qwen3_vl")` (a
`hasattr` on transformers imports the model's code, seconds).
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = [
    "CHAT_TEMPLATE",
    "SPECIAL_TOKENS",
    "build_tiny_causal_lm",
    "build_tiny_qwen2_5_vl",
    "build_tiny_qwen3_vl",
    "train_tokenizer",
]

# The Qwen special tokens, in the order Qwen checkpoints number them (their ids here are 0..6).
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# Written for this file: enough varied English for ~450 BPE merges on top of the 256 byte symbols.
_CORPUS = """
The report opens with a summary of the annual results. Revenue grew by twelve percent while costs
stayed flat, and the board approved a new dividend. Figure 3 shows the quarterly trend as a bar chart;
the second quarter was the strongest. Table 2 lists the regional numbers for Europe, Asia and America.
A user asks a question about a document, and the agent searches the pages, reads the picture, crops the
small print, and writes a short answer with the page it came from. What is the title of the chart on
page five? How many people attended the meeting in March? Which city has the highest population?
The video shows a man walking a dog in the park at noon; at the tenth second a red car drives past.
Memory keeps the useful pictures at a higher resolution and forgets the rest, so the context stays small.
Search, summarize, memorize, answer. The graph has nodes and edges; every node holds a query and items.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 25 100 2024 3.5 % $ = + - ( ) [ ] { } : ; , . ! ? " '
<tool_call> {"name": "add_search_node", "arguments": {"id": "n1", "query": "revenue 2024"}} </tool_call>
"""

# Written for this file in the Qwen chat format: a default system turn, then each message between
# <|im_start|>role and <|im_end|>; an image part becomes the vision placeholder the processor expands.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if loop.first and message['role'] != 'system' -%}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string -%}"
    "{{ message['content'] }}"
    "{%- else -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}{{ '<|vision_start|><|image_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'video' -%}{{ '<|vision_start|><|video_pad|><|vision_end|>' }}"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)


def protocol_texts() -> list[str]:
    """Every protocol's prompts and tool schemas (agent/protocols/), which the tiny models' tokenizer also learns:
    a rollout's context is mostly these, and merges learned on them make it shorter (the vimrag system prompt with its
    tools: 3,572 tokens on `_CORPUS` alone, 2,265 with these), so the CPU tests that roll out and train run faster."""
    from agent.protocols import get, names
    from agent.protocols.schema import specs

    texts = []
    for name in names():
        proto = get(name)
        texts += [t for t in proto.PROMPTS.values() if t]
        texts += [json.dumps(s, ensure_ascii=False) for s in specs(proto.tools, "absolute")]
    return texts


def train_tokenizer(vocab_size: int = 700, texts: list[str] | None = None):
    """A Qwen2Tokenizer over a byte-level BPE trained on `_CORPUS` (plus `texts`), with the Qwen special tokens.

    It is trained with the same normalizer and pre-tokenizer `Qwen2Tokenizer` builds from vocab and
    merges, so the saved folder tokenizes identically whichever way transformers reloads it.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte encodable: no unknown tokens
        show_progress=False,
    )
    tok.train_from_iterator([_CORPUS] * 4 + list(texts or []), trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m) if not isinstance(m, str) else tuple(m.split(" ")) for m in model["merges"]]
    qwen_tok = Qwen2Tokenizer(
        vocab=model["vocab"],
        merges=merges,
        unk_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    qwen_tok.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS[1:]})
    return qwen_tok


def _token_ids(tokenizer) -> dict[str, int]:
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    if len(set(ids.values())) != len(SPECIAL_TOKENS):
        raise ValueError(f"the tiny tokenizer's special tokens collide: {ids}; each needs its own id")
    return ids


def _save_model(path: Path, model, tokenizer) -> None:
    """Save `model` into `path` with greedy decoding that stops at the end of a turn or of the text."""
    from transformers import GenerationConfig

    ids = _token_ids(tokenizer)
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
        do_sample=False,
    )
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)


def _write_folder(path: Path, model, tokenizer, image_processor, video_processor, processor_cls) -> Path:
    _save_model(path, model, tokenizer)
    processor = processor_cls(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(path)
    return path


# The sizes both tiny Qwen-VL families share: 2 text layers, a 2-block 32-wide vision tower.
_TEXT = dict(intermediate_size=128, num_hidden_layers=2, num_key_value_heads=2, max_position_embeddings=4096)
_VISION = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, spatial_merge_size=2, temporal_patch_size=2)


def qwen_vl_token_ids(ids: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """The Qwen-VL config's special-token ids from a {token: id} map of `SPECIAL_TOKENS`: those of the text
    config (bos, eos, pad) and those of the top-level config (image, video, vision start and end)."""
    text = dict(bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"])
    top = dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"])
    top.update(vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    return text, top


def _vl_config(tokenizer, text: dict, vision: dict) -> dict:
    """The config arguments both tiny Qwen-VL families share (`_TEXT`, `_VISION` and the tokenizer's special
    ids), with each family's own `text` and `vision` settings on top."""
    text_ids, top_ids = qwen_vl_token_ids(_token_ids(tokenizer))
    text_config = dict(vocab_size=len(tokenizer), **_TEXT, **text_ids, **text)
    return dict(text_config=text_config, vision_config=dict(**_VISION, **vision), **top_ids)


def build_tiny_qwen2_5_vl(path: str | Path, seed: int = 0) -> Path:
    """Write a random tiny Qwen2.5-VL (14 px patches, 2x2 merge: a 28 px grid) into `path`; return it."""
    import torch
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    path = Path(path)
    tokenizer = train_tokenizer(texts=protocol_texts())
    hidden, heads = 64, 4  # head_dim 16: mrope_section (t, h, w) must sum to head_dim / 2 = 8
    config = Qwen2_5_VLConfig(
        **_vl_config(
            tokenizer,
            text=dict(
                hidden_size=hidden,
                num_attention_heads=heads,
                rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": [2, 3, 3]},
            ),
            vision=dict(out_hidden_size=hidden, patch_size=14, window_size=112, fullatt_block_indexes=[1]),
        )
    )
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    grid = dict(patch_size=14, merge_size=2, temporal_patch_size=2)
    return _write_folder(
        path,
        model,
        tokenizer,
        Qwen2VLImageProcessor(**grid, min_pixels=56 * 56, max_pixels=28 * 28 * 1280),
        Qwen2VLVideoProcessor(**grid),
        Qwen2_5_VLProcessor,
    )


def build_tiny_qwen3_vl(path: str | Path, seed: int = 0) -> Path:
    """Write a random tiny Qwen3-VL (16 px patches, 2x2 merge: a 32 px grid) into `path`; return it."""
    import torch
    from transformers import (
        Qwen2VLImageProcessor,
        Qwen3VLConfig,
        Qwen3VLForConditionalGeneration,
        Qwen3VLProcessor,
        Qwen3VLVideoProcessor,
    )

    path = Path(path)
    tokenizer = train_tokenizer(texts=protocol_texts())
    hidden, heads, head_dim = 64, 4, 16  # mrope_section (t, h, w) must sum to head_dim / 2 = 8
    config = Qwen3VLConfig(
        **_vl_config(
            tokenizer,
            text=dict(
                hidden_size=hidden,
                num_attention_heads=heads,
                head_dim=head_dim,
                rope_parameters={
                    "rope_type": "default",
                    "rope_theta": 5_000_000.0,
                    "mrope_section": [2, 3, 3],
                    "mrope_interleaved": True,
                },
            ),
            vision=dict(
                out_hidden_size=hidden,
                patch_size=16,
                num_position_embeddings=256,  # a 16x16 learned position grid
                deepstack_visual_indexes=[0],
            ),
        )
    )
    torch.manual_seed(seed)
    model = Qwen3VLForConditionalGeneration(config).eval()
    grid = dict(patch_size=16, merge_size=2, temporal_patch_size=2)
    # Qwen3-VL normalizes to mean = std = 0.5 per channel (its released preprocessor_config.json)
    norm = dict(image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    return _write_folder(
        path,
        model,
        tokenizer,
        Qwen2VLImageProcessor(**grid, **norm, size={"shortest_edge": 64 * 64, "longest_edge": 32 * 32 * 1280}),
        Qwen3VLVideoProcessor(**grid, **norm),
        Qwen3VLProcessor,
    )


def build_tiny_causal_lm(
    path: str | Path,
    seed: int = 0,
    texts: list[str] | None = None,
    vocab_size: int = 700,
    hidden: int = 64,
    layers: int = 2,
) -> Path:
    """Write a random tiny Qwen2 causal LM (text only) with a tokenizer trained on `_CORPUS` + `texts` (by default
    the protocols' prompts, as the VL models' tokenizer; `texts=[]`: `_CORPUS` alone)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    path = Path(path)
    tokenizer = train_tokenizer(vocab_size, protocol_texts() if texts is None else texts)
    ids = _token_ids(tokenizer)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).eval()
    _save_model(path, model, tokenizer)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(path)
    return path


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Write a tiny random model folder (for CPU smoke runs of training)")
    ap.add_argument("--kind", default="qwen2_5_vl", choices=["qwen2_5_vl", "qwen3_vl", "causal_lm"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    build = {"qwen2_5_vl": build_tiny_qwen2_5_vl, "qwen3_vl": build_tiny_qwen3_vl, "causal_lm": build_tiny_causal_lm}
    print(build[a.kind](a.out, seed=a.seed))


if __name__ == "__main__":
    main()
