"""rl/gym.py: environments from a seed, held-out ones that share nothing with training but the task, one unit per
page, and an expert that solves them through the real agent loop and retrieval."""

import hashlib
import json
import random
import re

import pytest

from rl.gym import CHUNK_CHARS, build_index, make_env, write_corpus, write_questions
from rl.gym_agents import expert_traces
from rl.gym_words import (
    HELD_LAYOUTS,
    HELD_MARKS,
    HELD_QUESTIONS,
    HELD_WORDS,
    TRAIN_LAYOUTS,
    TRAIN_QUESTIONS,
    WORDS,
    noise_word,
    varied_layout,
    varied_question,
    word_pools,
)


def test_an_environment_is_a_function_of_its_seed_and_its_answers_are_printed_once():
    a, b = make_env(7, hops=(1, 2, 3)), make_env(7, hops=(1, 2, 3))
    assert a.pages == b.pages and [q.question for q in a.questions] == [q.question for q in b.questions]
    assert make_env(8).pages != a.pages
    for q in a.questions:
        assert sum(q.answer in p for p in a.pages) == 1  # one page holds the code: no other route to it
        assert len(q.chain) == q.hops
        for name, nxt in zip(q.chain, q.chain[1:]):  # each hop's page names the next person
            own = next(p for p in a.pages if name in p and a.people[[x.name for x in a.people].index(name)].code in p)
            assert nxt in own


def test_held_out_environments_share_no_name_layout_or_wording_with_training():
    assert not set(TRAIN_LAYOUTS) & set(HELD_LAYOUTS)
    frames = lambda qs: {f for fs in qs.values() for f in fs}  # noqa: E731
    assert not frames(TRAIN_QUESTIONS) & frames(HELD_QUESTIONS)

    def words(split):  # the words of every name on any page of 50 environments, look-alikes and dead ends included
        pages = [p for s in range(50) for p in make_env(s, split).pages]
        return {
            w.lower() for p in pages for pair in re.findall(r"\b([A-Z][a-z]{3}) ([A-Z][a-z]{3})\b", p) for w in pair
        }

    train, held = words("train"), words("test")
    assert held and held <= HELD_WORDS and not train & HELD_WORDS  # no held-out given or family name in training
    held_q = {q.question for s in range(5) for q in make_env(s, "test").questions}
    assert all(q.startswith(("Which", "Please")) for q in held_q)


def test_three_syllable_names_are_too_many_to_memorize_and_still_split_held_out_from_training():
    """`syllables=3`: held-out and training words stay disjoint (look-alikes and dead ends included), and a training
    word recurs so rarely that a model cannot learn names by heart; 2 syllables keep every earlier environment."""
    from collections import Counter

    from rl.gym_words import word_pools

    held3, train3, rl3 = word_pools(3)
    assert not held3 & set(train3) and rl3 <= set(train3) and len(train3) == 11_060
    name = r"\b([A-Z][a-z]{5}) ([A-Z][a-z]{5})\b"

    def words(split, n):
        pages = [p for s in range(n) for p in make_env(s, split, syllables=3).pages]
        return Counter(w.lower() for p in pages for pair in re.findall(name, p) for w in pair)

    train, held = words("train", 200), words("test", 50)
    assert held and set(held) <= held3 and set(train) <= set(train3)
    people = Counter(
        w.lower() for s in range(200) for p in make_env(s, "train", syllables=3).people for w in p.name.split()
    )
    assert sum(people.values()) == 2000 and len(people) > 1700  # 2,000 name words, nearly all seen once
    # two syllables: the environments made before `syllables` existed (values printed by the code of 22c6d62)
    assert make_env(0, "train").pages[0] == (
        "Registry entry for Tufo Misu: access code 3466, partner Tufo Mise, joined in 2024. Filed under 95."
    )
    assert make_env(0, "train", pool="rl").pages[0].startswith("Visitor log: Zuka Veve signed in with Zuda Dino")
    assert make_env(0, "test").questions[0].question == "Which access code does Lizu Vema use?"
    with pytest.raises(ValueError, match="2 or 3 syllables"):
        make_env(0, "train", syllables=4)


def test_varied_training_environments_use_many_layouts_and_nothing_of_a_held_out_one():
    """`varied=True`: pages and question frames come from parts, far more of them than the fixed templates, and not
    one word or mark of a held-out layout or frame appears in them; held-out environments refuse it."""
    envs = [make_env(s, "train", syllables=3, varied=True) for s in range(100)]
    people = [p for e in envs for p in e.pages if "access code" in p.lower()]
    shapes = {re.sub(r"[A-Z][a-z]{5} [A-Z][a-z]{5}|\d+", "#", p) for p in people}
    frames = {re.sub(r"[A-Z][a-z]{5} [A-Z][a-z]{5}", "#", q.question) for e in envs for q in e.questions}
    assert len(shapes) > 150 and len(frames) > 20
    held_marks = {"Name", "Desk", "Staff", "card", "badge", "since", "|", "Which", "does", "use", "Please", "find"}
    assert held_marks == HELD_MARKS
    text = " ".join(p for e in envs for p in e.pages) + " " + " ".join(q.question for e in envs for q in e.questions)
    assert not held_marks & set(re.findall(r"\w+|\|", text))
    with pytest.raises(ValueError, match="varied layouts are for training"):
        make_env(0, "test", varied=True)


def test_mid_sentence_frames_put_the_name_before_a_word_and_keep_the_pages():
    """`mid`: a share of the varied questions name the person mid-sentence, followed by a word, with no word of a
    held-out frame; the pages (so the corpus and its index) are those of the same seed without it."""
    plain = [make_env(s, "train", varied=True) for s in range(60)]
    mid = [make_env(s, "train", varied=True, mid=0.5) for s in range(60)]
    assert [e.pages for e in plain] == [e.pages for e in mid]
    asked = [(q.question, q.chain[0]) for e in mid for q in e.questions]
    inside = [t for t, name in asked if re.search(re.escape(name) + r"(,| [a-z]+\b)", t)]  # ", what" or " got"
    assert 0.25 < len(inside) / len(asked) < 0.75
    assert not HELD_MARKS & set(re.findall(r"\w+|\|", " ".join(t for t, _ in asked)))
    with pytest.raises(ValueError, match="mid-sentence names go into varied layouts"):
        make_env(0, "train", mid=0.5)


def test_noise_words_are_new_words_and_leave_the_names_and_answers_alone():
    """`noise`: made-up words in varied pages and questions; none is a name word or a held-out layout's word, the
    questions' chains and answers are untouched, and noise=0 draws exactly the environments it drew before."""
    quiet = [make_env(s, "train", varied=True) for s in range(60)]
    assert [e.pages for e in quiet] == [make_env(s, "train", varied=True, noise=0.0).pages for s in range(60)]
    noisy = [make_env(s, "train", varied=True, noise=1.0) for s in range(60)]
    rng = random.Random(0)
    templates = [varied_layout(rng, 1.0) for _ in range(300)] + [varied_question(rng, 2, 1.0) for _ in range(300)]
    words = set(re.findall(r"\w+|\|", re.sub(r"\{\w+\}", " ", " ".join(templates))))
    assert not HELD_MARKS & words
    assert not {w.lower() for w in words} & (set(WORDS) | set(word_pools(3)[1]) | word_pools(3)[0])
    parts = set(re.findall(r"\w+", re.sub(r"\{\w+\}", " ", " ".join(varied_layout(rng) for _ in range(300)))))
    assert len(words - parts) > 200, "noise words are new words, many of them"
    for e in noisy:
        for q in e.questions:
            assert q.chain[0] in q.question and q.answer in q.evidence[-1]
            assert re.search(r"access code\W*(is\W+)?" + q.answer, q.evidence[-1], re.I)
    noise_words = [noise_word(random.Random(s)) for s in range(500)]
    assert all(3 <= len(w) <= 7 and w.isalpha() for w in noise_words)
    with pytest.raises(ValueError, match="pass varied=True"):
        make_env(0, "train", noise=0.5)


def test_rl_names_are_words_the_sft_pool_never_uses():
    """pool="sft" and pool="rl" split the training words: an RL environment's people, look-alikes included,
    are named only with RL_WORDS, which no SFT environment uses; held-out environments refuse a pool."""
    from rl.gym_words import RL_WORDS

    def name_words(pool):
        return {w.lower() for s in range(40) for p in make_env(s, "train", pool=pool).people for w in p.name.split()}

    sft, rl = name_words("sft"), name_words("rl")
    assert rl <= RL_WORDS and not sft & RL_WORDS and not (sft | rl) & HELD_WORDS
    assert len(RL_WORDS) == (len(WORDS) - len(HELD_WORDS)) // 5 == 92 and len(rl) > 50
    envs = [make_env(s, "train", pool="rl") for s in range(40)]
    assert sum(len(e.pages) - 5 - 1 for e in envs) > 10  # look-alike pages exist in this pool (5 people, 1 dead end)
    pages = [p for e in envs for p in e.pages]
    alike = {w.lower() for p in pages for pair in re.findall(r"\b([A-Z][a-z]{3}) ([A-Z][a-z]{3})\b", p) for w in pair}
    assert alike <= RL_WORDS  # every name on an RL page, near-duplicates and dead ends included
    with pytest.raises(ValueError, match="pool is one of"):
        make_env(0, "test", pool="rl")
    with pytest.raises(ValueError, match="pool is one of"):
        make_env(0, "train", pool="fresh")


def test_difficulty_is_controlled():
    env = make_env(1, hops=(3,), look_alikes=3, traps=2, questions=4)
    assert {q.hops for q in env.questions} == {3}
    assert len(env.pages) == 5 + 3 + 2
    with pytest.raises(ValueError, match="hops"):
        make_env(1, hops=(4,))
    with pytest.raises(ValueError, match="at least 4 people"):
        make_env(1, hops=(3,), people=3)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("gym")
    envs = [make_env(s, "train", hops=(1, 2)) for s in range(6)] + [make_env(s, "test", hops=(1, 2)) for s in range(3)]
    corpus = write_corpus(envs, root / "corpus")
    return envs, corpus, build_index(corpus, root / "index"), root


def test_every_page_is_its_own_unit(pool):
    from retrieval.retriever import Retriever

    envs, corpus, index, _ = pool
    assert all(len(p) <= CHUNK_CHARS for e in envs for p in e.pages)
    r = Retriever(index)
    for e in envs[:2] + envs[-1:]:
        for p in e.pages:  # searching a page's own text finds exactly that page, alone in its unit
            assert r.search(p, k=1, filters={"docs": [e.doc]})[0].unit.text.strip() == p


def test_the_expert_solves_its_questions_through_the_agent_and_the_dataset_loads(pool, monkeypatch):
    from eval.datasets import load_dataset
    from retrieval.retriever import Retriever

    envs, corpus, index, root = pool
    pairs = [(e, q) for e in envs for q in e.questions]
    saved = expert_traces(pairs, Retriever(index), root / "traces")
    assert saved >= 0.9 * len(pairs)
    trace = json.loads(next((root / "traces").glob("*.json")).read_text())
    searches = [s["output"] for s in trace["steps"] if s["output"].startswith("<search>")]
    assert searches and re.fullmatch(r"<answer>\d{4}</answer>", trace["steps"][-1]["output"])
    ds = load_dataset(f"jsonl:{write_questions(envs, root / 'q.jsonl')}", corpus=corpus)
    assert ds.per_doc and len(ds.items) == len(pairs) and ds.items[0].doc.startswith("env_")
    two = [json.loads(r) for r in write_questions(envs, root / "q2.jsonl", hops=[2]).read_text().splitlines()]
    assert [r["id"] for r in two] == [q.id for _, q in pairs if q.hops == 2] and two  # --rl-hops 2

    # a rerun into the same folder keeps every trace, and runs the agent for none of them
    class NoAgent:
        def __init__(self, *a, **k):
            raise AssertionError("a cached trace was run again")

    with monkeypatch.context() as m:
        m.setattr("agent.loop.Agent", NoAgent)
        assert expert_traces(pairs, Retriever(index), root / "traces") == saved
    # a trace kept under the same question id for another environment is not reused
    stamp = root / "traces" / f"{pairs[0][1].id}.key"
    stamp.write_text("another environment")
    assert expert_traces(pairs[:1], Retriever(index), root / "traces") == 1
    assert stamp.read_text() not in ("", "another environment")


needs_tesseract = pytest.mark.skipif(
    not __import__("shutil").which("tesseract"),
    reason="picture environments are read with tesseract (apt-get install tesseract-ocr; scripts/test.sh installs it)",
)


def test_picture_environments_print_codes_in_fine_print_and_text_ones_stay_as_they_were():
    text, pic = make_env(5, hops=(1, 2)), make_env(5, hops=(1, 2), fine_print=1.0)
    assert not text.pictures and text.doc.endswith(".md")
    # text environments are what they were before picture environments existed (digest made with rl/gym.py at
    # adcc9f6), so existing gym corpora, indexes and checkpoints stay valid
    envs = [make_env(s, split, hops=(1, 2, 3)) for split in ("train", "test") for s in range(20)]
    blob = json.dumps([[e.pages, [q.question for q in e.questions], [q.answer for q in e.questions]] for e in envs])
    assert hashlib.sha256(blob.encode()).hexdigest()[:16] == "893ddcbe47c72931"
    assert pic.pictures and pic.doc == "env_train_00005.pdf" and pic.page_files()[0] == "env_train_00005_1.png"
    assert [(p.name, p.code) for p in pic.people] == [(p.name, p.code) for p in text.people]  # the same registry
    for p in pic.people:  # every code left the page text for the fine print
        assert not any(p.code in page for page in pic.pages) and f"access code {p.code}" in pic.fine
    some = make_env(5, fine_print=0.5)
    assert 0 < sum(bool(f) for f in some.fine) < len(some.people)
    with pytest.raises(ValueError, match="probability"):
        make_env(5, fine_print=2.0)


@needs_tesseract
def test_fine_print_is_unread_as_shown_and_read_once_cropped():
    from agent.media import vrag_image
    from retrieval.ocr import get_ocr
    from rl.gym import FINE_BOX, GYM_OCR, render_page

    env = make_env(2, "test", fine_print=1.0)
    page, fine = next((t, f) for t, f in zip(env.pages, env.fine) if f)
    image, ocr = render_page(page, fine), get_ocr(GYM_OCR)
    shown = " ".join(ocr.read(vrag_image(image)).text.split())
    assert shown == " ".join(page.split())  # the page's words exactly, names' spaces included; not its code
    assert fine.split()[-1] not in shown
    assert fine.split()[-1] in ocr.read(vrag_image(image.crop(FINE_BOX))).text


@needs_tesseract
def test_the_expert_crops_fine_print_through_the_agent_and_a_text_policy_sees_what_ocr_reads(tmp_path):
    from retrieval.retriever import Retriever
    from rl.gym import fine_box_seen

    envs = [make_env(s, "train", hops=(1, 2), fine_print=1.0) for s in range(2)] + [make_env(9, "train")]
    corpus = write_corpus(envs, tmp_path / "corpus")
    assert len(list(corpus.glob("*.png"))) == sum(len(e.pages) for e in envs[:2])
    index = build_index(corpus, tmp_path / "index", pictures=True)
    pairs = [(e, q) for e in envs for q in e.questions]
    assert expert_traces(pairs, Retriever(index), tmp_path / "traces") == len(pairs)
    for _, q in pairs[:6]:  # fine print: the last hop's code is read from a crop of the page's foot
        steps = json.loads((tmp_path / "traces" / f"{q.id}.json").read_text())["steps"]
        outputs = [s["output"] for s in steps]
        assert outputs[-2:] == [f"<bbox>{fine_box_seen()}</bbox>", f"<answer>{q.answer}</answer>"]
        crop_seen = steps[-1]["messages"][-1]["content"]
        texts = " ".join(p.get("text", "") for p in crop_seen if p.get("type") == "text")
        assert f"access code {q.answer}" in texts and any(p.get("type") == "image" for p in crop_seen)
    text_steps = json.loads((tmp_path / "traces" / f"{pairs[-1][1].id}.json").read_text())["steps"]
    assert not any(s["output"].startswith("<bbox>") for s in text_steps)  # a text environment needs no crop

    # a crop before any page is shown is an invalid action, as in VRAG-RL (VRAG-RL/vrag_agent/generation.py at
    # 24f8d05, lines 132-157: with no image retrieved, `self.retrievaled_images[idx][-1]` raises and the except
    # branch at line 153 sends the invalid-action turn), and a
    # crop is checked against where the fine print is, for the metrics only: the reward reads the answer alone
    from agent.backends.base import Policy
    from agent.events import Cropped
    from agent.loop import Agent
    from eval.datasets import EvalItem
    from rl.experiment_eval import crop_facts
    from rl.gym_agents import agent_config
    from rl.rollout import score

    class Scripted(Policy):
        is_vlm, name = False, "scripted"

        def __init__(self, replies):
            self.replies = iter(replies)

        def stream(self, messages, view=None):
            yield next(self.replies)

    env, q = pairs[0]
    replies = [f"<bbox>{fine_box_seen()}</bbox>", f"<search>{q.chain[0]}</search>", f"<bbox>{fine_box_seen()}</bbox>"]
    cfg = agent_config(6, pictures=True, protocol="vrag", docs=[env.doc])
    trace = Agent(Retriever(index), Scripted([*replies, "<answer>0000</answer>"]), cfg).ask(q.question)
    assert "there is no image to crop yet" in str(trace.steps[1].messages[-1]["content"])
    assert len(trace.events_of(Cropped)) == 1  # the first <bbox> made no crop; the one after the search did
    page = trace.evidence[trace.events_of(Cropped)[0].source_info_id]["unit"]["page"]
    assert crop_facts(env, trace) == (2, 1, int(bool(env.fine[page - 1])))  # on the fine print if the page has one
    assert trace.answer == "0000" and score(trace, EvalItem(q.id, q.question, [q.answer])) == 0.0


def test_experiment_gym_with_fresh_rl_names(tmp_path):
    """`rl.experiment --fresh-rl-names`: the SFT pool's names avoid RL_WORDS and the RL pool's use only them."""
    from rl.experiment import ExperimentConfig, make_gym
    from rl.gym_words import RL_WORDS

    args = ExperimentConfig(sft_envs=4, rl_envs=3, test_envs=1, fresh_rl_names=True)
    g = make_gym(args, tmp_path / "gym")
    words = [{w.lower() for e in envs for p in e.people for w in p.name.split()} for envs in (g.sft, g.rl)]
    assert not words[0] & RL_WORDS and words[1] <= RL_WORDS
    assert (tmp_path / "gym" / "rl.jsonl").is_file()


@pytest.mark.parametrize(
    "bad, says",
    [({"rl_hops": [3]}, "--rl-hops must hold 1, 2 or both"), ({"copy_rounds": 0}, "--copy-rounds must be at least 1")],
)
def test_experiment_refuses_settings_it_cannot_run_before_it_builds_anything(tmp_path, bad, says):
    from rl.experiment import ExperimentConfig, run

    with pytest.raises(SystemExit, match=says):
        run(ExperimentConfig(out=str(tmp_path / "run"), **bad))
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_experiment_warm_start_alone(tmp_path):
    """`rl.experiment --seeds 0`: the warm start is trained with `--sft-seed` and measured on held-out questions,
    and no RL runs."""
    from retrieval.retriever import Retriever
    from rl.experiment import ExperimentConfig, make_gym, run, warm_start

    args = ExperimentConfig(
        seeds=0,
        sft_seed=3,
        sft_envs=3,
        rl_envs=1,
        test_envs=1,
        sft_epochs=1,
        copy_pretrain=3,  # the default path, copy pre-training in rounds, at a size a test can afford
        copy_rounds=2,
        copy_recall=1.0,  # not reached in 3 updates: both rounds run
        protocol="vrag",  # short episodes: what is checked is the warm start, not the protocol
        max_steps=4,  # short episodes; the expert still solves 7 of its 9 questions (6 steps: all 9)
        max_new_tokens=16,
        out=str(tmp_path / "run"),
    )
    got = run(args)
    copied = json.loads((tmp_path / "run" / "tiny_lm" / "copy_pretrain.json").read_text())
    assert copied["rounds"] == 2 and len(copied["recall_by_round"]) == 2
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert set(got["base"]) == {1, 2, "train"} and set(saved["base"]) == {"1", "2", "train"}
    assert all(0.0 <= b["accuracy"] <= 1.0 and b["steps"] >= 1 for b in got["base"].values())
    assert all(
        0.0 <= b["name_copied"] <= b["searched"] <= 1.0 and 0.0 <= b["answer_shown"] <= 1.0
        for b in saved["base"].values()
    )
    assert json.loads((tmp_path / "run" / "sft" / "sft_config.json").read_text())["seed"] == 3
    assert not list((tmp_path / "run").glob("*_seed*"))  # no RL run folder
    # a rerun into the same folder with fewer environments keeps only their traces
    kept = sorted(p.name for p in (tmp_path / "run" / "expert").iterdir())
    fewer = ExperimentConfig(**{**args.to_dict(), "sft_envs": 2, "copy_pretrain": 0})
    g = make_gym(fewer, tmp_path / "run" / "gym")
    warm_start(fewer, g, tmp_path / "run", Retriever(g.index))  # the warm start alone: the rest is checked above
    again = sorted(p.name for p in (tmp_path / "run" / "expert").iterdir())
    assert again and set(again) < set(kept) and all(n.startswith(("train00000", "train00001")) for n in again)


@pytest.mark.slow
def test_experiment_parallel_jobs_match_sequential_runs(tmp_path, monkeypatch):
    """`rl.experiment --jobs 2`: the RL runs go to two worker processes (one torch thread each) and give the same
    records, seed for seed, as the runs made one after another with one thread."""
    import torch

    from rl.experiment import ExperimentConfig, run

    monkeypatch.setenv("VIMRAG_FAISS_THREADS", "1")  # FAISS's thread count is torch's too (OpenMP)

    kw = dict(methods=["grpo"], seeds=2, updates=2, group=2, questions=1, sft_envs=3, rl_envs=2, test_envs=1)
    kw["protocol"] = "vrag"  # the plumbing of parallel runs; short episodes keep it quick
    kw["copy_pretrain"] = 0  # what is compared is the RL runs
    kw |= dict(max_steps=4, max_new_tokens=8)  # short episodes and turns: what is compared is the runs, not their text
    args = ExperimentConfig(**kw, sft_epochs=1, jobs=1, out=str(tmp_path / "run"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = json.loads(json.dumps(run(args)["rows"]))
        assert torch.get_num_threads() == 1  # nothing raised it during the runs
        seq = json.loads((tmp_path / "run" / "results.json").read_text())["runs"]["grpo"]
    finally:
        torch.set_num_threads(threads)
    par = run(ExperimentConfig(**{**args.to_dict(), "jobs": 2, "reuse_sft": True}))
    got = json.loads((tmp_path / "run" / "results.json").read_text())["runs"]["grpo"]
    assert [r["seed"] for r in got] == [0, 1]
    for a, b in zip(seq, got):
        assert a["curve"] == b["curve"] and a["held"] == b["held"]
    assert [r["held_2hop"] for r in one] == [list(r["held_2hop"]) for r in par["rows"]]


def table_runs(per_method: dict[str, list[float]], clip: dict[str, float]) -> dict:
    held = lambda a: {2: {"accuracy": a, "dead_ends": 0.0, "tokens": 30.0, "steps": 3.0}}  # noqa: E731
    train = lambda m: {"clip_frac": [clip[m]] * 3, "masked_success": [0.1] * 3, "masked_failure": [0.2] * 3}  # noqa: E731
    return {
        m: [
            {"seed": s, "held": held(a), "curve": [0.2, 0.6, 0.7], "wall_s": 10.0, "train": train(m)}
            for s, a in enumerate(accs)
        ]
        for m, accs in per_method.items()
    }


BASE = {1: {"accuracy": 0.8}, 2: {"accuracy": 0.5, "dead_ends": 0.0, "tokens": 30.0, "steps": 3.0}}


def test_the_table_compares_each_method_with_the_first_seed_by_seed(tmp_path):
    """`summarize`: each method's held-out 2-hop accuracy minus the first method's, seed by seed, with its
    t-interval, and the questions each seed got right; the 1-hop column only when 1-hop was measured after RL."""
    from rl.experiment import ExperimentConfig
    from rl.experiment_report import summarize

    runs = table_runs({"grpo": [0.5, 2 / 3, 0.5], "gspo": [2 / 3, 2 / 3, 5 / 6]}, {"grpo": 0.02, "gspo": 0.01})
    got = summarize(runs, BASE, ExperimentConfig(seeds=3, test_envs=2), tmp_path, 60.0)
    gspo = next(r for r in got["rows"] if r["method"] == "gspo")
    # differences 1/6, 0, 1/3: mean 0.167, sd 0.167, t(2) 4.303: half-width 0.414
    assert gspo["vs_first"] == (0.167, -0.247, 0.581)
    md = got["markdown"]
    assert "minus grpo's (seed by seed)" in md and "| gspo | yes | 0.722 [" in md and "+0.167 [-0.247, +0.581]" in md
    assert "| grpo | 3 | 4 | 3 |" in md and "| gspo | 4 | 4 | 5 |" in md and "(SFT start: 3)" in md
    assert "held-out 1-hop |" not in md.splitlines()[2]  # not measured after RL: no column


def test_a_method_that_cannot_act_is_reported_not_ranked_and_the_ablation_row_is_ggpo_minus_gspo(tmp_path):
    from rl.experiment import ExperimentConfig
    from rl.experiment_report import summarize

    accs = {"grpo": [0.5, 0.5, 0.5], "gspo": [0.5, 2 / 3, 0.5], "ggpo": [2 / 3, 2 / 3, 2 / 3], "gppo": [1, 1, 1]}
    runs = table_runs(accs, {"grpo": 0.02, "gspo": 0.01, "ggpo": 0.01, "gppo": 0.0})
    got = summarize(runs, BASE, ExperimentConfig(seeds=3, test_envs=2), tmp_path, 60.0)
    rows = {r["method"]: r for r in got["rows"]}
    assert rows["gppo"]["acts"] == "no: clip fraction 0" and rows["ggpo"]["acts"] == "yes"
    assert "| gppo | no: clip fraction 0 |" in got["markdown"] and "not ranked" in got["markdown"]
    assert got["ablation"][2] == (0.111, -0.128, 0.35)  # 1/6, 0, 1/6: mean 0.111, sd 0.096, t(2) 4.303
    assert got["ablation"][1] is None  # 1-hop was not measured after RL
    assert "GGPO minus GSPO seed by seed" in got["markdown"]


def test_held_out_and_training_dead_ends_per_success_are_two_columns(tmp_path):
    """The first table's dead ends per successful episode are the held-out ones; the second table's, training's."""
    from rl.experiment import ExperimentConfig
    from rl.experiment_report import summarize

    runs = table_runs({"grpo": [0.5, 0.5, 0.5]}, {"grpo": 0.02})
    for r in runs["grpo"]:
        r["held"][2]["dead_ends_per_success"] = 0.5
        r["train"]["dead_ends_per_success"] = [0.1] * 3
    row = summarize(runs, BASE, ExperimentConfig(seeds=3, test_envs=2), tmp_path, 60.0)["rows"][0]
    assert (row["held_dead_ends_per_success"], row["dead_ends_per_success"]) == (0.5, 0.1)


def test_a_crop_lands_on_the_fine_print_when_its_box_covers_half_of_it():
    """rl/experiment_eval.py crop_facts, by hand: the fine print "access code 1234" sits at FINE_AT; a crop covering
    all of it lands, one over the page's head does not, one over its left 40% does not, and a crop on a page
    without fine print never does."""
    from types import SimpleNamespace

    from agent.events import Cropped
    from rl.experiment_eval import crop_facts
    from rl.gym import fine_print_box

    env = SimpleNamespace(fine=["access code 1234", ""])
    x1, y1, x2, y2 = fine_print_box(env.fine[0])
    boxes = [[0, 500, 800, 600], [0, 0, 800, 100], [x1, y1, x1 + 0.4 * (x2 - x1), y2], [x1, y1, x2, y2]]
    crops = [Cropped(i, source_info_id="p1" if i < 4 else "p2", bbox_raw=b) for i, b in enumerate(boxes + [boxes[0]])]
    trace = SimpleNamespace(
        steps=[SimpleNamespace(output="<bbox>[1, 2, 3, 4]</bbox>")] * 5
        + [SimpleNamespace(output="<answer>1</answer>")],
        evidence={"p1": {"unit": {"page": 1}}, "p2": {"unit": {"page": 2}}},
        events_of=lambda cls: crops,
    )
    assert crop_facts(env, trace) == (5, 5, 2)  # the whole foot and the exact box land
