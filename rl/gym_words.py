"""What the gym's names, pages and questions are made of: the name words (split into training, RL and held-out
pools), the page and question templates of training and held-out environments, and the varied layouts assembled
from parts, with made-up noise words (rl/gym.py builds environments from them)."""

from __future__ import annotations

import functools
import itertools
import random
import re
import string

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
# Frames whose name stands mid-sentence, followed by a word (`varied_question(mid=...)`): a model that only ever saw
# the name at a frame's end copies "Kazu Foka use" as "Foka Foka" (rl/RESULTS.md, "Fine print")
_MID_FRAMES = [
    "For {who}, what is the access code?",
    "What access code has {who} got?",
    "Tell me what access code {who} has.",
    "What access code is {who} given?",
]


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


def varied_question(rng: random.Random, hops: int, noise: float = 0.0, mid: float = 0.0) -> str:
    """A question frame assembled from parts, asking for the code `hops` hops from {a}; with probability `mid`, one
    whose name stands mid-sentence (_MID_FRAMES); with probability `noise`, made-up lower-case words before it or
    before its end (`noise_word`). `noise=0` and `mid=0` draw what they drew before each option.

    >>> varied_question(random.Random(0), 2)
    'Give me the access code of the partner of {a}?'
    >>> varied_question(random.Random(0), 2, noise=1.0)
    'Give me the access code of the partner of {a} zjplsg eydtz?'
    """
    who = "the partner of " * (hops - 1) + "{a}"
    if mid and rng.random() < mid:
        frame = rng.choice(_MID_FRAMES).format(who=who)
    elif rng.random() < 0.25:
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
