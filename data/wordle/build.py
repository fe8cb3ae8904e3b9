"""Rebuild the Wordle word lists from TextArena's own code and data (one-off, needs the oracle).

    NLTK_DATA=/work/shared/reference/nltk_data python data/wordle/build.py

Secrets: ``WordleEnv._load_word_list`` itself, i.e. NLTK ``words("en-basic")`` (or ``words("en")``
for the hardcore variants) kept where ``pos_tag([word])`` says ``NN`` and the length fits, in
TextArena's order (so ``random.Random(seed).choice`` picks what ``WordleEnv.reset(seed=seed)``
picks). ``nltk.pos_tag`` rebuilds its tagger on every call (about 9 ms); for the 236k words of
``words("en")`` we hand TextArena one shared ``PerceptronTagger`` instead, after checking on a
sample that it tags exactly as ``pos_tag`` does.

Dictionary: ``EnglishDictionary(keep_proper_nouns=False, include_nltk=True)`` as ``WordleEnv``
builds it (hunspell en_US + en_GB expanded by TextArena's affix code, plus NLTK ``words("en")``),
keeping the entries a guess can reach: the guess is a lower-cased ``\\w+`` match, so entries with an
apostrophe or a capital can never be accepted.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("NLTK_DATA", str(HERE.parents[2] / "shared" / "reference" / "nltk_data"))

import nltk  # noqa: E402

nltk.download = lambda *args, **kwargs: True  # the data is local; never touch the network

import textarena.envs.Wordle.env as wordle_env  # noqa: E402
from nltk.corpus import words  # noqa: E402
from nltk.tag.perceptron import PerceptronTagger  # noqa: E402
from textarena.envs.utils.word_lists import EnglishDictionary  # noqa: E402

LENGTHS = (
    5,
    7,
)  # what the registered variants use: Wordle-v0(-hardcore) 5, Wordle-v0-long(-hardcore) 7
SECRET_FILES = {
    (5, False): "secrets.txt",
    (7, False): "secrets-7.txt",
    (5, True): "secrets-hardcore.txt",
    (7, True): "secrets-hardcore-7.txt",
}


def secret_list(word_length: int, hardcore: bool) -> list[str]:
    env = wordle_env.WordleEnv.__new__(wordle_env.WordleEnv)
    env.word_length = word_length
    env._load_word_list(hardcore=hardcore)
    return env.word_list


def fast_pos_tag() -> None:
    tagger = PerceptronTagger()
    sample = words.words("en-basic") + random.Random(0).sample(words.words("en"), 3000)
    for word in sample:
        assert nltk.pos_tag([word]) == tagger.tag([word]), word
    wordle_env.pos_tag = tagger.tag


def main() -> None:
    real_pos_tag = wordle_env.pos_tag
    for hardcore in (False, True):
        if hardcore:
            fast_pos_tag()
        for length in LENGTHS:
            secrets = secret_list(length, hardcore)
            (HERE / SECRET_FILES[length, hardcore]).write_text("\n".join(secrets) + "\n")
            print(SECRET_FILES[length, hardcore], len(secrets))
    wordle_env.pos_tag = real_pos_tag

    every = EnglishDictionary(keep_proper_nouns=False, include_nltk=True).get_all_words()
    for length in LENGTHS:
        reachable = sorted(
            w for w in every if len(w) == length and re.fullmatch(r"\w+", w) and w == w.lower()
        )
        assert all(re.fullmatch(r"[a-z]+", w) for w in reachable)
        (HERE / f"dictionary-{length}.txt").write_text("\n".join(reachable) + "\n")
        print(f"dictionary-{length}.txt", len(reachable))


if __name__ == "__main__":
    main()
