"""Tiny models for tests: the random ones live in rl/tiny.py (the CPU training experiment uses them too); the
scripted one, which always writes the same reply, is built here."""

from rl.tiny import (
    CHAT_TEMPLATE,
    SPECIAL_TOKENS,
    build_tiny_causal_lm,
    build_tiny_qwen2_5_vl,
    build_tiny_qwen3_vl,
    train_tokenizer,
)

__all__ = [
    "CHAT_TEMPLATE",
    "SPECIAL_TOKENS",
    "build_scripted_qwen2_5_vl",
    "build_tiny_causal_lm",
    "build_tiny_qwen2_5_vl",
    "build_tiny_qwen3_vl",
    "train_tokenizer",
]


def build_scripted_qwen2_5_vl(path, chunks: list[str], seed: int = 0):
    """A tiny Qwen2.5-VL that, under greedy decoding, always writes `"".join(chunks)` and stops.

    Each chunk becomes one added (non-special) token; the decoder layers' output projections are zeroed, so
    the next token depends on the last one only, and the embeddings and output head form a chain: the last
    token of the generation prompt -> chunk 1 -> ... -> chunk n -> <|im_end|>. A real server (transformers
    serve) then sees a model that writes, say, a Qwen tool call, and parses it as one. No weights are
    downloaded: the model is the random tiny one, rewired.
    """
    import torch
    from tokenizers import AddedToken
    from transformers import AutoModelForImageTextToText, AutoProcessor

    path = build_tiny_qwen2_5_vl(path, seed=seed)
    proc = AutoProcessor.from_pretrained(path)
    tok = proc.tokenizer
    tok.add_tokens([AddedToken(c, special=False, normalized=False) for c in chunks])
    model = AutoModelForImageTextToText.from_pretrained(path)
    model.resize_token_embeddings(len(tok), mean_resizing=False)
    prompt = proc.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False, add_generation_prompt=True)
    start = tok(prompt, add_special_tokens=False)["input_ids"][-1]
    chain = [start] + [tok.convert_tokens_to_ids(c) for c in chunks] + [tok.convert_tokens_to_ids("<|im_end|>")]
    if len(set(chain[:-1])) != len(chain) - 1:
        raise ValueError(f"the chunks must be distinct tokens: {chunks}")
    emb, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    if len(chain) > emb.shape[1]:
        raise ValueError(f"at most {emb.shape[1] - 1} chunks fit the hidden size")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")) and "visual" not in name:
                p.zero_()  # every text layer adds nothing: the last hidden state is the last token's embedding
        for k, (a, b) in enumerate(zip(chain, chain[1:])):
            emb[a] = 0
            emb[a, k] = 10.0  # token a points along axis k ...
            head[b] = 0
            head[b, k] = 100.0  # ... where token b's logit is the only large one
    model.save_pretrained(path)
    proc.save_pretrained(path)
    return path
