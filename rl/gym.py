"""A procedural retrieval gym: environments built from a seed, with questions of controllable difficulty.

    envs = [make_env(seed, split="train", hops=(1, 2)) for seed in range(300)]
    corpus = write_corpus(envs, Path("runs/gym/corpus"))     # one document per environment
    build_index(corpus, Path("runs/gym/index"))              # one unit per page, cached
    write_questions(envs, Path("runs/gym/train.jsonl"))      # a `jsonl:` dataset for `vimrag train` and eval
    pairs = [(e, q) for e in envs for q in e.questions]
    expert_traces(pairs, Retriever(Path("runs/gym/index")), Path("runs/gym/expert"))  # rl/gym_agents.py

An environment is a small registry of people. Each has a page: their access code (the answer a question asks
for), their partner (another person of the same environment) and a distracting number (a room or a year). Around
them are look-alikes (same given name, family name one letter off, another code) and dead-end pages that name a
person without giving the code. A question asks for a code one to three hops away: "the access code of A"
(1 hop), "of A's partner" (2 hops: A's page names B, B's page holds the code), "of the partner of A's partner"
(3). The answer is printed once, on one page, so the only way to it is to search, read, and search again.

What is learned must be a skill, so a training run draws every question from environments it has never seen,
and held-out environments differ in everything but the task: their names come from words no training name
uses (of the same syllables), their pages from layouts and sentences no training page uses, and their questions
from other wordings. The tokenizer is trained on training text only (rl/experiment.py), so a held-out name is
read in pieces.

Each environment is one text document, its pages its paragraphs, indexed with `chunk_chars` set so that every
page is one unit; an environment's questions search only its own document (`doc`, as MMLongBench-Doc's do),
and a pool of environments shares one cached index.

Picture environments (`make_env(fine_print=p)`) hold the same registry as page images, `env_..._N.png` (VRAG's
page-image convention, so they are indexed, with OCR, as the pages of one document), and print each person's
access code, with probability p, in fine print at the foot of their page instead of in its text: 12 px type on a
1600x600 page, about 8 px at the size VRAG shows a page (1034x387), and 16-20 px once the foot is cropped (VRAG-RL
enlarges a crop to at least 256*28*28 pixels). Of 300 such codes tesseract read none as shown and all 300 from
the crop the expert makes (11 px type: 298; 14 px: about half are read as shown). A text-only model is given
what OCR reads in each picture as it is shown (AgentConfig.read_pictures), so the page says the code is "in the
fine print", and only a `<bbox>` on the page's foot makes it legible. The expert crops exactly there, and only
when it needs the code.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rl.gym_words import (
    HELD_LAYOUTS,
    HELD_QUESTIONS,
    NAME_POOLS,
    TRAIN_LAYOUTS,
    TRAIN_QUESTIONS,
    TRAP_LAYOUTS,
    varied_layout,
    varied_question,
    word_pools,
)

MIN_PAGE, MAX_PAGE = 90, 170  # chars of a page; CHUNK_CHARS keeps every page its own unit (two never fit)
CHUNK_CHARS = 2 * MIN_PAGE - 1

# Picture environments: the page, its type sizes, and where the fine print sits (pixels of the page image).
PAGE_SIZE = (1600, 600)
TEXT_PX, FINE_PX, LINE_PX = 40, 12, 60
LINE_CHARS = 60  # characters per printed line at TEXT_PX
FINE_NOTE = "in the fine print"  # stands where the code would be, on a page whose code is in fine print
FINE_AT = (60, 552)  # top-left of the fine print line
FINE_BOX = (0, 510, 800, 600)  # the page's foot, where the expert crops
GYM_OCR = "tesseract"  # reads the names' spaces exactly at the shown size; rapidocr drops some (Rise Rove -> RiseRove)


@dataclass
class Person:
    name: str
    code: str
    partner: str = ""


@dataclass
class Question:
    id: str
    question: str
    answer: str
    hops: int
    chain: list[str]  # the names searched, in order: the last one's page holds the answer
    evidence: list[str]  # the page texts read along the chain


@dataclass
class Env:
    seed: int
    split: str
    people: list[Person]
    pages: list[str]
    questions: list[Question] = field(default_factory=list)
    fine: list[str] = field(default_factory=list)  # picture environments: each page's fine print ("" for none)

    @property
    def pictures(self) -> bool:
        return bool(self.fine)

    @property
    def doc(self) -> str:
        """The document its questions search: a text file, or the PDF name its page images stand for."""
        return f"env_{self.split}_{self.seed:05d}.{'pdf' if self.pictures else 'md'}"

    def page_files(self) -> list[str]:
        """File names of a picture environment's pages, 1-based as VRAG names page images."""
        stem = self.doc.rsplit(".", 1)[0]
        return [f"{stem}_{i}.png" for i in range(1, len(self.pages) + 1)] if self.pictures else []


@functools.cache
def _words(held: bool, pool: str = "all", syllables: int = 2) -> tuple[str, ...]:
    """The words names are made of: held-out ones, or training ones (all, or the SFT or RL share)."""
    held_words, train, rl = word_pools(syllables)
    if held:
        return tuple(sorted(held_words))
    if pool == "rl":
        return tuple(sorted(rl))
    return tuple(w for w in train if pool == "all" or w not in rl)


def _name(rng: random.Random, words: tuple[str, ...]) -> str:
    return f"{rng.choice(words).capitalize()} {rng.choice(words).capitalize()}"


def _look_alike(name: str, rng: random.Random, words: tuple[str, ...]) -> str | None:
    """Same given name, family name with one vowel changed (and still a word of the same pool): the
    near-duplicate a careless reader confuses. None if no such word exists."""
    given, family = name.split(" ")
    allowed = set(words)
    low = family.lower()
    options = [low[:i] + v + low[i + 1 :] for i, c in enumerate(low) if c in "aeiou" for v in "aeiou" if v != c]
    options = [w for w in options if w in allowed]
    return f"{given} {rng.choice(options).capitalize()}" if options else None


def _page(template: str, rng: random.Random, limit: int = MAX_PAGE, **kw: str) -> str:
    text = template.format(other=str(rng.randint(100, 999)), year=str(rng.randint(1990, 2024)), **kw)
    while len(text) < MIN_PAGE:  # pad short pages so that two never share a unit
        text += f" Filed under {rng.randint(10, 99)}."
    if len(text) > limit:
        raise ValueError(f"a gym page is {len(text)} characters, over {limit}: shorten its names or template")
    return text


def render_page(text: str, fine: str = ""):
    """A page image: `text` wrapped in TEXT_PX type, and `fine` (if any) in FINE_PX type at the foot."""
    import textwrap

    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", PAGE_SIZE, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=TEXT_PX)
    lines = textwrap.wrap(text, LINE_CHARS)
    if 60 + LINE_PX * len(lines) > FINE_BOX[1]:
        raise ValueError(f"a gym page of {len(text)} characters does not fit above the fine print; shorten it")
    for i, line in enumerate(lines):
        draw.text((60, 60 + LINE_PX * i), line, font=font, fill="black")
    if fine:
        draw.text(FINE_AT, fine, font=ImageFont.load_default(size=FINE_PX), fill="black")
    return image


def fine_print_box(fine: str) -> tuple[int, int, int, int]:
    """Where `render_page` prints the fine print `fine`, in the page's pixels: the box a crop must cover to read it."""
    from PIL import ImageFont

    x1, y1, x2, y2 = ImageFont.load_default(size=FINE_PX).getbbox(fine)
    return FINE_AT[0] + x1, FINE_AT[1] + y1, FINE_AT[0] + x2, FINE_AT[1] + y2


def fine_box_seen() -> list[int]:
    """FINE_BOX in the pixels of the page as VRAG shows it (agent/media.py vrag_size): what a <bbox> names."""
    from agent.media import vrag_size

    w, h = vrag_size(*PAGE_SIZE)
    fx, fy = w / PAGE_SIZE[0], h / PAGE_SIZE[1]
    x1, y1, x2, y2 = FINE_BOX
    return [round(x1 * fx), round(y1 * fy), round(x2 * fx), round(y2 * fy)]


def make_env(
    seed: int,
    split: str = "train",
    hops: tuple[int, ...] = (1, 2),
    people: int = 5,
    look_alikes: int = 2,
    traps: int = 1,
    questions: int = 3,
    fine_print: float = 0.0,
    pool: str = "all",
    syllables: int = 2,
    varied: bool = False,
    noise: float = 0.0,
    mid: float = 0.0,
) -> Env:
    """One environment from `seed`: `people` in a partner cycle, `look_alikes` near-duplicates of some of them,
    `traps` dead-end pages, and `questions` questions whose hop counts are drawn from `hops`. With `fine_print`
    above 0 it is a picture environment, and each person's code is in fine print with that probability (1: all).
    `pool` picks a training environment's name words: "all" training words, or the "sft" or "rl" share
    (RL_WORDS); held-out environments always use the held-out words. `syllables`: of each name word, 2 or 3
    (`word_pools`: with 3, names are too many to memorize). `varied`: a training environment's pages and questions
    are assembled from parts (`varied_layout`, `varied_question`) instead of drawn from the fixed templates, and
    `noise` is the share of those pages and questions that also carry made-up words (`noise_word`), and `mid` the
    share of its questions whose name stands mid-sentence.

    >>> e = make_env(0, "train", hops=(2,))
    >>> q = e.questions[0]
    >>> q.hops, len(q.chain), q.answer == next(p.code for p in e.people if p.name == q.chain[-1])
    (2, 2, True)
    >>> held = make_env(0, "test")
    >>> held.doc, held.questions[0].question.startswith(("Which", "Please"))
    ('env_test_00000.md', True)
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be train or test, got {split!r}")
    if not hops or any(h not in (1, 2, 3) for h in hops):
        raise ValueError(f"hops must be a non-empty choice of 1, 2 and 3; got {hops}")
    if people < max(hops) + 1:
        raise ValueError(f"{max(hops)} hops need at least {max(hops) + 1} people in a partner cycle; got {people}")
    if not 0.0 <= fine_print <= 1.0:
        raise ValueError(f"fine_print is a probability from 0 to 1; got {fine_print}")
    if varied and split != "train":
        raise ValueError("varied layouts are for training environments; held-out ones keep their own templates")
    if (noise or mid) and not varied:
        raise ValueError("noise words and mid-sentence names go into varied layouts: pass varied=True with them")
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise is a probability from 0 to 1; got {noise}")
    if pool not in NAME_POOLS or (pool != "all" and split != "train"):
        raise ValueError(f"pool is one of {NAME_POOLS}, and only 'all' for held-out environments; got {pool!r}")
    words = _words(split == "test", pool, syllables)
    rng = random.Random(f"{split}:{seed}")
    fine_rng = random.Random(f"{split}:{seed}:fine")  # its own stream: a text environment stays as it was
    layouts = TRAIN_LAYOUTS if split == "train" else HELD_LAYOUTS
    wording = TRAIN_QUESTIONS if split == "train" else HELD_QUESTIONS
    names: list[str] = []
    while len(names) < people:
        n = _name(rng, words)
        if n not in names and n.split(" ")[0] not in {m.split(" ")[0] for m in names}:
            names.append(n)
    codes = rng.sample(range(1000, 10000), people + look_alikes)
    cast = [Person(n, str(c)) for n, c in zip(names, codes)]
    order = rng.sample(range(people), people)  # a random cycle: everyone has a partner, no one is their own
    for i, j in zip(order, order[1:] + order[:1]):
        cast[i].partner = cast[j].name
    small = {p.name for p in cast if fine_print and fine_rng.random() < fine_print}
    limit = MAX_PAGE if not fine_print else LINE_CHARS * 7  # a picture page is one unit whatever its length

    def layout() -> str:
        return varied_layout(rng, noise) if varied else rng.choice(layouts)

    pages = {
        p.name: _page(
            layout(),
            rng,
            limit,
            name=p.name,
            code=FINE_NOTE if p.name in small else p.code,
            partner=p.partner,
        )
        for p in cast
    }
    fine = {pages[p.name]: f"access code {p.code}" for p in cast if p.name in small}
    extra = []
    for k in range(look_alikes):
        twin = cast[k % people]
        alike = _look_alike(twin.name, rng, words)
        if alike is None or alike in pages:
            continue
        decoy = cast[rng.randrange(people)].name
        extra.append(_page(layout(), rng, limit, name=alike, code=str(codes[people + k]), partner=decoy))
    for _ in range(traps):
        a, b = rng.sample(names, 2)
        extra.append(_page(rng.choice(TRAP_LAYOUTS), rng, limit, name=a, other_name=b))
    all_pages = list(pages.values()) + extra
    rng.shuffle(all_pages)
    env = Env(seed, split, cast, all_pages, fine=[fine.get(p, "") for p in all_pages] if fine_print else [])
    by_name = {p.name: p for p in cast}
    for q in range(questions):
        h = rng.choice(hops)
        start = rng.choice(names)
        chain = [start]
        for _ in range(h - 1):
            chain.append(by_name[chain[-1]].partner)
        target = by_name[chain[-1]]
        env.questions.append(
            Question(
                f"{split}{seed:05d}-{q}",
                (varied_question(rng, h, noise, mid) if varied else rng.choice(wording[h])).format(a=start),
                target.code,
                h,
                chain,
                [pages[n] for n in chain],
            )
        )
    return env


def write_corpus(envs: list[Env], corpus: Path) -> Path:
    """One document per environment under `corpus`: a text file, or a picture environment's page images. A file
    that already holds the same content is left alone, so a cached index of the folder stays valid."""
    import io

    corpus.mkdir(parents=True, exist_ok=True)
    for env in envs:
        if env.pictures:
            for name, text, fine in zip(env.page_files(), env.pages, env.fine):
                buf = io.BytesIO()
                render_page(text, fine).save(buf, format="PNG")
                path = corpus / name
                if not path.is_file() or path.read_bytes() != buf.getvalue():
                    path.write_bytes(buf.getvalue())
            continue
        text = "\n\n".join(env.pages) + "\n"
        path = corpus / env.doc
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    return corpus


def gold_evidence(env: Env, question: Question) -> list[dict]:
    """The pages a question's answer rests on, one per hop: each chain person's own page, as the index numbers it
    (a text environment's page k is its chunk k, CHUNK_CHARS keeping one page per unit; a picture environment's is
    PDF page k + 1). A search whose results hold one of them is a valuable retrieval (rl/ggpo.py R_val).

    >>> e = make_env(0, "train", hops=(2,))
    >>> [g["chunk"] for g in gold_evidence(e, e.questions[0])] == [e.pages.index(t) for t in e.questions[0].evidence]
    True
    """
    at = [env.pages.index(text) for text in question.evidence]
    if env.pictures:
        return [{"file": env.doc, "page": k + 1} for k in at]
    return [{"file": env.doc, "chunk": k} for k in at]


def write_questions(envs: list[Env], path: Path, hops: Iterable[int] | None = None) -> Path:
    """The environments' questions as a `jsonl:` dataset (eval/datasets.py): each one scoped to its environment's
    document (`doc`), its gold evidence the page of each hop (`gold_evidence`); `hops` and `chain` ride along for
    analysis. Given `hops`, only the questions with those hop counts are written."""
    keep = None if hops is None else set(hops)
    rows = [
        {
            "id": q.id,
            "question": q.question,
            "answer": [q.answer],
            "doc": env.doc,
            "evidence": gold_evidence(env, q),
            "hops": q.hops,
            "chain": q.chain,
        }
        for env in envs
        for q in env.questions
        if keep is None or q.hops in keep
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def build_index(corpus: Path, index: Path, progress: bool = False, pictures: bool = False) -> Path:
    """The pool's index, with one unit per page (`CHUNK_CHARS`); an existing one is brought up to date. With
    `pictures`, page images are read with GYM_OCR (tesseract: `apt-get install tesseract-ocr`)."""
    from retrieval.ingest import Indexer, IngestConfig

    ocr = GYM_OCR if pictures else "none"
    Indexer(index, IngestConfig(chunk_chars=CHUNK_CHARS, ocr=ocr)).index([str(corpus)], progress=progress)
    return index
