"""A procedural retrieval gym: environments built from a seed, with questions of controllable difficulty.

    envs = [make_env(seed, split="train", hops=(1, 2)) for seed in range(300)]
    corpus = write_corpus(envs, Path("runs/gym/corpus"))     # one document per environment
    build_index(corpus, Path("runs/gym/index"))              # one unit per page, cached
    write_questions(envs, Path("runs/gym/train.jsonl"))      # a `jsonl:` dataset for `vimrag train` and eval
    pairs = [(e, q) for e in envs for q in e.questions]
    expert_traces(pairs, Retriever(Path("runs/gym/index")), Path("runs/gym/expert"))  # through the real agent

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
import hashlib
import itertools
import json
import random
import re
import string
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agent.backends.base import Policy

# Names are two words of two syllables. The words are split once: a word that appears in a held-out name never
# appears in a training one, so no held-out person shares a given or family name with anyone seen in training;
# the syllables are shared, so a held-out name is spelt in pieces the tokenizer learned from training text (a
# piece never seen in training would be a token never trained, which no reader could copy).
SYLLABLES = "ka lo mi re su ta ve no ri da pe zu bo li ne ga fo tu ma se ro di vu ke".split()


@functools.cache
def word_pools(syllables: int = 2) -> tuple[frozenset[str], tuple[str, ...], frozenset[str]]:
    """(held-out words, training words in a fixed order, the RL share of the training words) for names whose words
    have `syllables` syllables. Two syllables make 576 words, few enough that a tiny model memorizes the 461
    training ones as tokens and then fails to copy a held-out one it has never seen (rl/RESULTS.md, "seed by
    seed"). Three make 13,824: each training word is seen about once, the byte-pair tokenizer learns pieces of
    words rather than whole ones, and a held-out word is spelt in the very pieces training words are, so copying is
    the only way to a name.

    >>> held, train, rl = word_pools(2)
    >>> len(held), len(train), len(rl), bool(held & set(train)), rl <= set(train)
    (115, 461, 92, False, True)
    >>> len(word_pools(3)[0]), len(word_pools(3)[1])
    (2764, 11060)
    """
    if syllables not in (2, 3):
        raise ValueError(f"name words have 2 or 3 syllables; got {syllables}")
    words = ["".join(t) for t in itertools.product(SYLLABLES, repeat=syllables)]
    tag = "" if syllables == 2 else f" ({syllables} syllables)"  # 2: the split every earlier run used
    held = frozenset(random.Random(f"held-out words{tag}").sample(words, len(words) // 5))  # a fifth, fixed
    # A fifth of the training words, kept for RL environments with `pool="rl"` while SFT environments take
    # `pool="sft"` (the rest): then RL rewards copying names the warm start never saw, the skill held-out
    # environments measure, instead of the training names it already knows (rl/RESULTS.md, "Three times the
    # held-out questions"). The default, "all", draws from every training word, as environments were made before.
    train = tuple(w for w in words if w not in held)  # in product order: the order rng.choice sees
    rl = frozenset(random.Random(f"rl-only words{tag}").sample(train, len(train) // 5))
    return held, train, rl


WORDS = ["".join(t) for t in itertools.product(SYLLABLES, repeat=2)]
HELD_WORDS, _TRAIN_WORDS, RL_WORDS = word_pools(2)
NAME_POOLS = ("all", "sft", "rl")

# Page layouts and wordings: {name}, {code}, {partner}, {other}. Held-out ones share no template with training.
TRAIN_LAYOUTS = [
    "{name}. The access code of {name} is {code}. {name} works with {partner}. Room {other}.",
    "Registry entry for {name}: access code {code}, partner {partner}, joined in {year}.",
    "{name} holds access code {code}. Partner on file: {partner}. Office {other}.",
    "Profile - {name} - access code {code} - partner {partner} - floor {other}.",
    "{name} (room {other}) has the access code {code} and the partner {partner}.",
]
HELD_LAYOUTS = [
    "Name: {name} | Access code: {code} | Partner: {partner} | Desk {other}",
    "Staff card of {name}, badge {other}: access code {code}; partner {partner} (since {year}).",
]
TRAP_LAYOUTS = [
    "Meeting note: {name} and {other_name} met in the lobby. No codes were shared.",
    "Visitor log: {name} signed in with {other_name} at the front desk.",
]
# Questions: several training frames per hop count, so that what is learned is "find the name, search it", not
# one sentence; held-out frames are new sentences around the same two key phrases (a tiny model trained from
# scratch cannot learn a synonym it never saw, so "access code" and "partner" stay).
TRAIN_QUESTIONS = {
    1: [
        "What is the access code of {a}?",
        "Tell me the access code of {a}.",
        "I need the access code of {a}.",
        "{a}: what is the access code?",
    ],
    2: [
        "What is the access code of the partner of {a}?",
        "Tell me the access code of the partner of {a}.",
        "I need the access code of the partner of {a}.",
        "The partner of {a}: what is the access code?",
    ],
    3: [
        "What is the access code of the partner of the partner of {a}?",
        "Tell me the access code of the partner of the partner of {a}.",
    ],
}
HELD_QUESTIONS = {
    1: ["Which access code does {a} use?", "Please find the access code of {a}."],
    2: ["Which access code does the partner of {a} use?", "Please find the access code of the partner of {a}."],
    3: ["Which access code does the partner of the partner of {a} use?"],
}
# Varied training environments (`make_env(varied=True)`): every page and question frame is assembled from parts,
# so a model cannot find a code by where it sits in one of five templates; it must find the words "access code".
# No part is a word or mark of a held-out layout or frame (Name, Desk, Staff, card, badge, since, |, Which, does,
# use, Please, find): held-out environments stay unseen in everything but the two key phrases.
_VARIED_INTROS = ["{name}. ", "{name}: ", "{name} - ", "Registry entry for {name}: ", "Profile of {name}: "]
_VARIED_SEPS = [" ", ": ", " is ", " = ", " - "]  # between a label and its value
_VARIED_JOINS = [", ", "; ", ". ", " - "]
_VARIED_CODE = ["access code", "Access code"]
_VARIED_PARTNER = ["partner", "Partner"]
_VARIED_OTHER = ["room", "Room", "office", "Office", "floor", "Floor"]
_VARIED_ASKS = ["What is", "Tell me", "I need", "Give me", "Show me", "Look up"]
_VARIED_ENDS = ["?", ".", ""]


# Words a held-out layout or frame uses that no training part may (checked by tests/rl/test_gym.py).
HELD_MARKS = {"Name", "Desk", "Staff", "card", "badge", "since", "|", "Which", "does", "use", "Please", "find"}
_NAME_WORD = re.compile(f"(?:{'|'.join(SYLLABLES)})+")
_NOISE_MARKS = ["/", "#", "*", "+", "~"]
_HELD_LOWER = {m.lower() for m in HELD_MARKS}


def noise_word(rng: random.Random) -> str:
    """A made-up word of 3 to 7 random letters: never a name word (those are runs of SYLLABLES) nor a word of a
    held-out layout or frame. It stands for the words a held-out page has that training never showed.

    >>> [noise_word(random.Random(s)) for s in range(3)]
    ['Ynbiqp', 'Szyc', 'ccl']
    """
    while True:
        w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 7)))
        if not _NAME_WORD.fullmatch(w) and w not in _HELD_LOWER:
            return w.capitalize() if rng.random() < 0.5 else w


def varied_layout(rng: random.Random, noise: float = 0.0) -> str:
    """A page template assembled from parts: an intro, then the code, partner and other number in any order.

    With probability `noise`, the page also gets words no page has used before (`noise_word`): one or two fields
    with a made-up label and a number or made-up value, a made-up lower-case word or two before the intro, and a
    made-up mark between a made-up label and its value. A model trained on them learns that an unknown word is no
    reason to change what it does; without them, a held-out page's "Desk 420" alone turns an answer into another
    search (rl/RESULTS.md). (Made-up marks between all of a page's fields too, tried at 370d5a8, did worse.)
    `noise=0` draws exactly what it drew before the option existed.

    >>> varied_layout(random.Random(1))
    '{name}: Access code - {code}, Office - {other}, partner - {partner}.'
    >>> varied_layout(random.Random(1), noise=1.0)
    '{name}: woi - Dpam, Access code - {code}, Vgnxaq + aau, partner - {partner}, Office - {other}.'
    """
    intro = rng.choice(_VARIED_INTROS)
    sep, join = rng.choice(_VARIED_SEPS), rng.choice(_VARIED_JOINS)
    fields = [
        rng.choice(_VARIED_CODE) + sep + "{code}",
        rng.choice(_VARIED_PARTNER) + sep + "{partner}",
        rng.choice(_VARIED_OTHER) + sep + "{other}",
    ]
    if noise and rng.random() < noise:
        for _ in range(rng.randint(1, 2)):
            value = str(rng.randint(1, 9999)) if rng.random() < 0.5 else noise_word(rng)
            fields.append(noise_word(rng) + rng.choice([sep, " " + rng.choice(_NOISE_MARKS) + " "]) + value)
        if rng.random() < 0.5:
            words = " ".join(noise_word(rng).lower() for _ in range(rng.randint(1, 2)))  # lower: a name's edge
            intro = words + " " + intro.replace("{name}. ", "{name}, ")
    rng.shuffle(fields)
    return intro + join.join(fields) + "."


def varied_question(rng: random.Random, hops: int, noise: float = 0.0) -> str:
    """A question frame assembled from parts, asking for the code `hops` hops from {a}; with probability `noise`,
    made-up lower-case words before it or before its end (`noise_word`). `noise=0` draws what it drew before the option.

    >>> varied_question(random.Random(0), 2)
    'Give me the access code of the partner of {a}?'
    >>> varied_question(random.Random(0), 2, noise=1.0)
    'Give me the access code of the partner of {a} zjplsg eydtz?'
    """
    who = "the partner of " * (hops - 1) + "{a}"
    if rng.random() < 0.25:
        frame = f"{who[0].upper()}{who[1:]}: what is the access code?"
    else:
        frame = f"{rng.choice(_VARIED_ASKS)} the access code of {who}{rng.choice(_VARIED_ENDS)}"
    if noise and rng.random() < noise:
        words = " ".join(noise_word(rng).lower() for _ in range(rng.randint(1, 2)))  # lower: a name's edge
        if rng.random() < 0.5:
            return f"{words} {frame}"
        end = frame[-1] if frame[-1] in "?." else ""
        return f"{frame[: len(frame) - len(end)]} {words}{end}"
    return frame


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
) -> Env:
    """One environment from `seed`: `people` in a partner cycle, `look_alikes` near-duplicates of some of them,
    `traps` dead-end pages, and `questions` questions whose hop counts are drawn from `hops`. With `fine_print`
    above 0 it is a picture environment, and each person's code is in fine print with that probability (1: all).
    `pool` picks a training environment's name words: "all" training words, or the "sft" or "rl" share
    (RL_WORDS); held-out environments always use the held-out words. `syllables`: of each name word, 2 or 3
    (`word_pools`: with 3, names are too many to memorize). `varied`: a training environment's pages and questions
    are assembled from parts (`varied_layout`, `varied_question`) instead of drawn from the fixed templates, and
    `noise` is the share of those pages and questions that also carry made-up words (`noise_word`).

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
    if noise and not varied:
        raise ValueError("noise words go into varied layouts: pass varied=True with noise")
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
                (varied_question(rng, h, noise) if varied else rng.choice(wording[h])).format(a=start),
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


def write_questions(envs: list[Env], path: Path, hops: Iterable[int] | None = None) -> Path:
    """The environments' questions as a `jsonl:` dataset (eval/datasets.py): each one scoped to its environment's
    document (`doc`), which is its gold evidence; `hops` and `chain` ride along for analysis. Given `hops`, only
    the questions with those hop counts are written."""
    keep = None if hops is None else set(hops)
    rows = [
        {
            "id": q.id,
            "question": q.question,
            "answer": [q.answer],
            "doc": env.doc,
            "evidence": [{"file": env.doc}],
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


SYSTEM = "Search with <search>name</search>, then answer with <answer>code</answer>."  # short: a tiny model reads it


SYSTEM_PICTURES = (
    "Search with <search>name</search>, crop fine print with <bbox>[x1, y1, x2, y2]</bbox>, then answer with "
    "<answer>code</answer>."
)


def agent_config(max_steps: int = 6, pictures: bool = False, **kw):
    """The agent every gym episode runs through: VRAG's chain of tag actions, one page per search; with
    `pictures`, the text GYM_OCR reads in each picture as shown is given beside it (`read_pictures`)."""
    from agent.settings import AgentConfig

    extra = {"read_pictures": GYM_OCR, "prompts": {"system": SYSTEM_PICTURES}} if pictures else {}
    return AgentConfig(
        **{"protocol": "vrag", "max_steps": max_steps, "top_k": 3, "prompts": {"system": SYSTEM}, **extra, **kw}
    )


class Expert(Policy):
    """The scripted expert of one question: it searches each name of the chain, searches again while the page
    shown is not that person's own (a look-alike, a dead end, or the page of someone who names them as partner),
    reads the partner off each page, and answers the code from the last one; when that code is in fine print, it
    crops the page's foot first and reads it there. It knows the answers; it never guesses, so its traces are
    what SFT imitates: search, check, hop, crop, copy."""

    is_vlm = False
    name = "gym-expert"

    def __init__(self, env: Env, question: Question) -> None:
        self.people = {p.name: p for p in env.people}
        self.chain, self.pos, self.asked = list(question.chain), 0, False
        codes = {p.code: p.name for p in env.people}
        # a person's own page in fine-print form: its text, as OCR gives it (words joined by single spaces)
        self.fine_pages = {codes[f.split()[-1]]: " ".join(text.split()) for text, f in zip(env.pages, env.fine) if f}

    def stream(self, messages: list[dict], view=None):
        seen = messages[-1]["content"] if messages and messages[-1]["role"] == "user" and self.asked else ""
        seen = seen if isinstance(seen, str) else " ".join(p.get("text", "") for p in seen)
        seen = " ".join(seen.split())
        who = self.people[self.chain[self.pos]]
        fine_page = self.fine_pages.get(who.name)
        if self.asked and (who.code in seen or (fine_page and fine_page in seen)):  # on the person's own page
            if self.pos < len(self.chain) - 1:
                self.pos += 1
                who = self.people[self.chain[self.pos]]
            elif who.code in seen:
                yield f"<answer>{who.code}</answer>"
                return
            else:  # the code is in the fine print at the foot
                yield f"<bbox>{fine_box_seen()}</bbox>"
                return
        self.asked = True
        yield f"<search>{who.name}</search>"


def expert_traces(
    env_questions: list[tuple[Env, Question]], retriever, out: Path, max_steps: int = 6, pictures: bool | None = None
) -> int:
    """Run the expert on each (environment, question) through the real agent loop, scoped to the environment's
    document; save the traces that answered right under `out`. Returns how many were saved. `pictures`: the
    agent of a pool with picture environments (`agent_config`) for every question; None: each environment's own.
    A trace already in `out` for the same question, environment and agent settings (the digest in its `.key` file
    beside it) is kept, not run again, so a rerun into the same folder costs nothing. The digest does not cover the
    expert's own code: after changing it, delete the folder."""
    from agent.loop import Agent

    out.mkdir(parents=True, exist_ok=True)
    saved = 0
    for env, q in env_questions:
        shown = env.pictures if pictures is None else pictures
        key = hashlib.sha256(
            json.dumps([q.question, q.answer, env.doc, env.pages, env.fine, shown, max_steps]).encode()
        ).hexdigest()
        path, stamp = out / f"{q.id}.json", out / f"{q.id}.key"
        if path.is_file() and stamp.is_file() and stamp.read_text() == key:
            saved += 1
            continue
        cfg = agent_config(max_steps, shown, docs=[env.doc])
        trace = Agent(retriever, Expert(env, q), cfg).ask(q.question)
        if (trace.answer or "").strip() == q.answer:
            path.write_text(json.dumps(trace.to_dict()))
            stamp.write_text(key)
            saved += 1
        else:  # a stale trace of another environment under this id
            path.unlink(missing_ok=True)
            stamp.unlink(missing_ok=True)
    return saved
