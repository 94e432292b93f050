"""The transformers backend on tiny random Qwen-VL folders: loading, pixel budgets, streaming, errors."""

import importlib.util
import threading

import pytest
from PIL import Image

from agent.backends import PolicyConfig, PolicyError, load_policy
from agent.backends.base import Tokens
from tests.tiny_vlm import build_tiny_qwen2_5_vl, build_tiny_qwen3_vl

transformers = pytest.importorskip("transformers")

FAMILIES = {"qwen2_5_vl": (build_tiny_qwen2_5_vl, 28, 14)}  # builder, grid px, vision patch px
# whether this transformers has Qwen3-VL, without importing its modeling code (5 s at collection, in every worker)
if importlib.util.find_spec("transformers.models.qwen3_vl") is not None:
    FAMILIES["qwen3_vl"] = (build_tiny_qwen3_vl, 32, 16)


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, tmp_path_factory):
    build, grid, patch = FAMILIES[request.param]
    path = build(tmp_path_factory.mktemp(request.param))
    return {"name": request.param, "path": path, "grid": grid, "patch": patch}


@pytest.fixture(scope="module")
def policy(family):
    p = load_policy(PolicyConfig(backend="transformers", model=str(family["path"]), max_new_tokens=8))
    yield p
    p.close()


def _image(w: int, h: int, color: str = "red") -> Image.Image:
    return Image.new("RGB", (w, h), color)


def _messages(*images: Image.Image) -> list[dict]:
    parts = [{"type": "text", "text": "What is the title of the chart?"}]
    parts += [{"type": "image", "image": im, "ref": f"Picture {k + 1}"} for k, im in enumerate(images)]
    return [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": parts}]


def test_loads_through_load_policy(policy, family):
    from agent.backends.transformers_vl import TransformersPolicy

    assert isinstance(policy, TransformersPolicy)
    assert policy.patch == family["grid"]  # patch_size * spatial_merge_size from config.json
    import torch

    gpu = torch.cuda.is_available()
    assert policy.device == ("cuda" if gpu else "cpu")  # device="auto"
    dtype = "bfloat16" if gpu and torch.cuda.is_bf16_supported() else "float32"  # dtype="auto"
    assert policy.describe() == f"transformers {family['path']} on {policy.device} ({dtype})"


def test_on_grid_images_reach_the_model_unchanged(policy, family):
    g, p = family["grid"], family["patch"]
    sizes = [(2 * g, 3 * g), (4 * g, 2 * g), (g, g)]  # (w, h); e.g. 56x84, 112x56, 28x28 on Qwen2.5-VL
    text = policy.generate(_messages(*[_image(w, h) for w, h in sizes]))
    info = policy.last_inputs_info
    assert isinstance(text, str) and info["output_tokens"] >= 1
    assert info["image_grid_thw"] == [[1, h // p, w // p] for w, h in sizes]
    assert info["image_pixels"] == [w * h for w, h in sizes]
    assert max(info["image_pixels"]) <= policy.config.max_pixels
    # the override matters: with its own defaults the processor would blow the one-patch image up
    default = policy.processor(text=["<|vision_start|><|image_pad|><|vision_end|>"], images=[_image(g, g)])
    assert default["image_grid_thw"].tolist() != [[1, g // p, g // p]]


def test_larger_than_max_pixels_is_reduced(family):
    g, p = family["grid"], family["patch"]
    cap = 16 * g * g
    small = load_policy(
        PolicyConfig(backend="transformers", model=str(family["path"]), max_new_tokens=2, max_pixels=cap)
    )
    small.generate(_messages(_image(12 * g, 6 * g)))  # 72 grid cells, cap is 16
    ((t, gh, gw),) = small.last_inputs_info["image_grid_thw"]
    assert t == 1 and gh * gw * p * p <= cap and gh % 2 == gw % 2 == 0
    assert gw > gh  # aspect ratio kept (landscape stays landscape)
    small.close()
    small.close()  # safe twice
    with pytest.raises(PolicyError, match="closed"):
        small.generate(_messages())


def test_stream_joins_to_greedy_generate(policy):
    import torch

    messages = _messages(_image(2 * policy.patch, policy.patch, "blue"))
    *chunks, tokens = list(policy.stream(messages))
    assert all(isinstance(c, str) and c for c in chunks) and isinstance(tokens, Tokens)
    assert "".join(chunks) == policy.generate(messages)
    # and to a plain, non-streamed greedy generate decoded in one go
    inputs = policy.prepare(messages)
    with torch.inference_mode():
        out = policy.model.generate(**inputs, max_new_tokens=policy.config.max_new_tokens, do_sample=False)
    new = out[0, inputs["input_ids"].shape[1] :]  # (new_tokens,)
    assert "".join(chunks) == policy.processor.tokenizer.decode(new, skip_special_tokens=True)
    assert tokens.token_ids == new.tolist() and tokens.logprobs is None  # the stream ends with the reply's ids


def test_sampling_is_seeded(family):
    def sample(seed):
        p = load_policy(
            PolicyConfig(
                backend="transformers", model=str(family["path"]), max_new_tokens=8, temperature=1.0, seed=seed
            )
        )
        return p.generate([{"role": "user", "content": "Search, summarize, memorize, answer."}])

    first = sample(1)
    assert first == sample(1)
    assert first != sample(2)


def test_text_only_messages(policy):
    text = policy.generate([{"role": "user", "content": "How many people attended the meeting?"}])
    assert isinstance(text, str)
    assert policy.last_inputs_info["image_grid_thw"] == [] and policy.last_inputs_info["input_tokens"] > 5


def test_closing_the_stream_stops_generation(policy):
    stream = policy.stream(_messages())
    next(stream, None)
    stream.close()
    assert not any(t.name == "transformers-generate" and t.is_alive() for t in threading.enumerate())


def test_generation_error_is_a_policy_error(policy, monkeypatch):
    def boom(**kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(policy.model, "generate", boom)
    with pytest.raises(PolicyError, match="out of memory"):
        policy.generate(_messages())


def test_bad_message_parts_are_rejected(policy):
    with pytest.raises(PolicyError, match="not a PIL image"):
        policy.generate([{"role": "user", "content": [{"type": "image", "image": "page1.png", "ref": "Picture 1"}]}])
    with pytest.raises(PolicyError, match="aspect ratio"):
        policy.generate(_messages(_image(201 * policy.patch, policy.patch)))
    with pytest.raises(PolicyError, match="'audio'"):
        policy.generate([{"role": "user", "content": [{"type": "audio", "audio": b""}]}])


def test_missing_model_folder(tmp_path):
    missing = tmp_path / "no_such_model"
    with pytest.raises(PolicyError, match="no_such_model.*does not exist"):
        load_policy(PolicyConfig(backend="transformers", model=str(missing)))
    (tmp_path / "empty").mkdir()
    with pytest.raises(PolicyError, match="has no config.json"):
        load_policy(PolicyConfig(backend="transformers", model=str(tmp_path / "empty")))
    with pytest.raises(PolicyError, match="needs a model"):
        load_policy(PolicyConfig(backend="transformers", model=""))


def test_uncached_hub_id_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # an empty cache: nothing can be found
    with pytest.raises(PolicyError, match="vimrag-test/none.*HF_HUB_OFFLINE"):
        load_policy(PolicyConfig(backend="transformers", model="vimrag-test/none"))


def test_unloadable_folder_names_the_path(tmp_path):
    bad = tmp_path / "broken"
    bad.mkdir()
    (bad / "config.json").write_text("{not json")
    with pytest.raises(PolicyError, match="broken"):
        load_policy(PolicyConfig(backend="transformers", model=str(bad)))
