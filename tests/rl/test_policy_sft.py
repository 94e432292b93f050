"""Trainable policies return the exact tokens, log-probs and inputs of a reply (images included); SFT
learns the replies of saved traces."""

import json

import pytest
import torch
from PIL import Image

from rl.tiny import build_tiny_qwen2_5_vl


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    path = build_tiny_qwen2_5_vl(tmp_path_factory.mktemp("vl") / "m")
    return path, AutoModelForImageTextToText.from_pretrained(path), AutoProcessor.from_pretrained(path)


def test_sampled_log_probs_are_reproduced_by_the_training_forward_with_images(tiny):
    from agent.backends.base import Tokens
    from rl.policy import VLPolicy, sequence_logprobs

    _, model, proc = tiny
    pol = VLPolicy(model, proc, max_new_tokens=8)
    img = Image.new("RGB", (112, 84), (200, 30, 30))
    msgs = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What colour is this?"},
                {"type": "image", "image": img, "ref": "Picture 1"},
            ],
        }
    ]
    *chunks, tokens = pol.stream(msgs)  # the reply, then its Tokens
    assert isinstance(tokens, Tokens) and all(isinstance(c, str) for c in chunks)
    assert "pixel_values" in tokens.model_inputs and 0 < len(tokens.token_ids) <= 8
    again = sequence_logprobs(model, tokens.model_inputs, torch.tensor(tokens.token_ids))  # (N,)
    assert torch.allclose(again, torch.tensor(tokens.logprobs), atol=1e-4)
    assert "".join(chunks) == proc.tokenizer.decode(tokens.token_ids, skip_special_tokens=True)


def test_sft_trains_on_action_tokens_of_saved_traces(tiny, tmp_path):
    from agent.events import StepRecord, Trace
    from rl.config import SFTConfig
    from rl.sft import Example, example_loss, load_examples, train_sft
    from rl.trainer import TrainConfig, make_policy

    path, model, proc = tiny
    runs = tmp_path / "run" / "traces"
    runs.mkdir(parents=True)
    reply = (
        '<tool_call>\n{"name": "add_answer_node", "arguments": {"answer": "85", "parent_ids": ["root"]}}\n</tool_call>'
    )
    for i in range(2):
        t = Trace(
            question="How many people?",
            protocol="vimrag",
            backend="scripted",
            status="answered",
            answer="85",
            steps=[
                StepRecord(
                    1,
                    [{"role": "user", "content": "How many people work there? 85 people."}],
                    output=reply,
                    action={"name": "add_answer_node", "args": {}},
                ),
                StepRecord(2, [{"role": "user", "content": "again"}], output="garbage", action=None),
            ],
        )
        (runs / f"q{i}.json").write_text(json.dumps(t.to_dict()))
    (tmp_path / "run" / "predictions.jsonl").write_text(
        json.dumps({"id": "q0", "trace": "traces/q0.json", "score": 1.0})
        + "\n"
        + json.dumps({"id": "q1", "trace": "traces/q1.json", "score": 0.0})
        + "\n"
    )
    exs = load_examples(str(tmp_path / "run"))
    assert len(exs) == 2 and all(e.target == reply for e in exs)  # malformed replies are not imitated
    assert len(load_examples(str(tmp_path / "run"), min_score=1.0)) == 1
    pol = make_policy(model, proc, True, TrainConfig(model="m", dataset="d"))
    _, n = example_loss(pol, model, exs[0])
    assert n == len(proc.tokenizer(reply + "<|im_end|>", add_special_tokens=False)["input_ids"])  # target only
    sft = SFTConfig(str(tmp_path / "run"), str(path), str(tmp_path / "out"), 4, lr=3e-3, grad_accum=1, min_score=1.0)
    res = train_sft(sft, progress=False)
    losses = [h["loss"] for h in res["history"]]
    assert res["examples"] == 1 and losses == sorted(losses, reverse=True) and losses[-1] < 0.9 * losses[0], losses
    assert (tmp_path / "out" / "config.json").is_file()
    assert json.loads((tmp_path / "out" / "sft_config.json").read_text())["min_score"] == 1.0
    with pytest.raises(FileNotFoundError, match="no traces"):
        load_examples(str(tmp_path / "nothing"))
    assert isinstance(Example([], "x").target, str)


def test_a_padded_batch_gives_the_mean_of_the_one_by_one_losses(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.policy import TextPolicy
    from rl.sft import Example, batch_loss, encode_text, example_loss
    from rl.tiny import build_tiny_causal_lm

    path = build_tiny_causal_lm(tmp_path / "lm")
    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    pol = TextPolicy(model, tok)
    exs = [
        Example([{"role": "user", "content": "What is the code?"}], "<answer>4821</answer>"),
        Example(
            [{"role": "user", "content": "Find the page about the northern line, please."}], "<search>line</search>"
        ),
        Example([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "ok"),
    ]
    one_by_one = torch.stack([example_loss(pol, model, ex)[0] for ex in exs]).mean()
    together = batch_loss(pol, model, [encode_text(pol, ex) for ex in exs])  # right-padded to the longest
    assert together.item() == pytest.approx(one_by_one.item(), abs=1e-5)


def test_greedy_decoding_takes_the_most_likely_token_whatever_the_seed(tmp_path):
    """The experiment's held-out evaluation decodes greedily: the same reply under any seed, each token the argmax
    of the model's next-token distribution."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.policy import TextPolicy
    from rl.tiny import build_tiny_causal_lm

    path = build_tiny_causal_lm(tmp_path / "lm", hidden=32, layers=1)
    model, tok = AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
    pol = TextPolicy(model, tok, max_new_tokens=5, greedy=True)
    inputs = pol.encode([{"role": "user", "content": "which code?"}])
    replies = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        replies.append(pol.sample(inputs)[0].tolist())
    assert replies[0] == replies[1]
    with torch.no_grad():
        ids = torch.cat([inputs["input_ids"][0], torch.tensor(replies[0][:-1])])[None]
        logits = model(input_ids=ids).logits[0, inputs["input_ids"].shape[1] - 1 :]
    assert logits.argmax(-1).tolist()[: len(replies[0])] == replies[0]
