"""Do contextual neighbours separate the senses of a word? 1-NN tagging of ambiguous words.

The measured version of `keras-elmo neighbors` (the paper's Table 4, scored as in its
Table 5): for words that People's Daily tags in more than one way (`地` u/n, `上` f/v,
`为` p/v, `发展` v/vn, ...), each held-out occurrence takes the tag of its nearest training
occurrence of the same word, by cosine of biLM layer j. Layer 0 (the char CNN) is the same
for every occurrence, so it can only give the word's most frequent tag: that is the
baseline. A gain in layers 1..L means the contextual neighbours follow the sense.

Words: those with at least `--min-count` training occurrences whose second most frequent
tag has at least `--min-share` of them (at most `--max-words`, most frequent first). At most
`--max-train` training occurrences per word are used (a seeded sample).

Example:
    python examples/senses.py --data data/people_daily --model runs/people_daily_small
"""

import collections
import os
import random
import sys
import time

import _example


def parse_args(argv):
    parser = _example.parser(__doc__)
    parser.add_argument("--data", required=True, help="directory with train/heldout.conll")
    parser.add_argument("--model", required=True, help="biLM MODEL_DIR")
    parser.add_argument("--out", default=None, help="also write senses.md here")
    parser.add_argument("--min-count", type=int, default=100)
    parser.add_argument("--min-share", type=float, default=0.1)
    parser.add_argument("--max-words", type=int, default=12)
    parser.add_argument("--max-train", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def ambiguous_words(train, min_count, min_share, max_words):
    """Words whose second tag has >= min_share of >= min_count occurrences."""
    tags = collections.defaultdict(collections.Counter)
    for tokens, sentence_tags in train:
        for word, tag in zip(tokens, sentence_tags):
            tags[word][tag] += 1
    chosen = []
    for word, counts in tags.items():
        total = sum(counts.values())
        common = counts.most_common(2)
        if total >= min_count and len(common) == 2 and common[1][1] >= min_share * total:
            chosen.append((total, word))
    return [word for _, word in sorted(chosen, reverse=True)[:max_words]], tags


def occurrences(data, words):
    """word -> [(sentence index, position, tag)]."""
    found = collections.defaultdict(list)
    for index, (tokens, sentence_tags) in enumerate(data):
        for position, (word, tag) in enumerate(zip(tokens, sentence_tags)):
            if word in words:
                found[word].append((index, position, tag))
    return found


def vectors(runner, data, places):
    """`{(sentence, position): (L + 1, 2P) unit vectors}` for the listed places."""
    import numpy as np

    wanted = collections.defaultdict(list)
    for index, position, _ in places:
        wanted[index].append(position)
    out = {}
    keyed = ((index, data[index][0]) for index in sorted(wanted))
    for index, _, layers in runner.iter_layers(keyed):
        for position in wanted[index]:
            v = layers[:, position]  # (L + 1, 2P)
            out[(index, position)] = v / np.maximum(np.linalg.norm(v, axis=-1,
                                                                   keepdims=True), 1e-12)
    return out


def main(argv=None):
    args = parse_args(argv)
    _example.import_tensorflow()
    import numpy as np

    from keras_elmo.embedding.bilm_runner import BiLMRunner
    from tasks.datasets import read_conll
    from keras_elmo.formats.model_files import VOCAB_FILE
    from keras_elmo.embedding.loaders import load_bilm, load_token_cache

    start = time.perf_counter()
    train = read_conll(os.path.join(args.data, "train.conll"))
    test = read_conll(os.path.join(args.data, "heldout.conll"))
    words, tag_counts = ambiguous_words(train, args.min_count, args.min_share, args.max_words)
    if not words:
        raise SystemExit("senses.py: error: no word qualifies; lower --min-count/--min-share.")
    rng = random.Random(args.seed)
    train_places = {w: p if len(p) <= args.max_train else rng.sample(p, args.max_train)
                    for w, p in occurrences(train, set(words)).items()}
    test_places = occurrences(test, set(words))
    bilm = load_bilm(args.model)
    vocab = os.path.join(args.model, VOCAB_FILE)
    runner = BiLMRunner(bilm, token_cache=load_token_cache(bilm, vocab)
                        if os.path.isfile(vocab) else None)
    train_vectors = vectors(runner, train, [p for ps in train_places.values() for p in ps])
    test_vectors = vectors(runner, test, [p for ps in test_places.values() for p in ps])
    num_layers = bilm.num_output_layers

    rows, correct, majority_correct, total = [], np.zeros(num_layers), 0, 0
    for word in words:
        places = test_places.get(word, [])
        if not places:
            continue
        majority = tag_counts[word].most_common(1)[0][0]
        reference = np.stack([train_vectors[(i, p)] for i, p, _ in train_places[word]])
        reference_tags = [tag for _, _, tag in train_places[word]]
        hits = np.zeros(num_layers)
        for i, p, tag in places:
            scores = np.einsum("nld,ld->nl", reference, test_vectors[(i, p)])  # (n, L + 1)
            nearest = scores.argmax(axis=0)  # (L + 1,)
            hits += [reference_tags[n] == tag for n in nearest]
        hits[0] = sum(tag == majority for _, _, tag in places)  # layer 0: one vector per word
        shares = ", ".join(f"{t} {c / sum(tag_counts[word].values()):.0%}"
                           for t, c in tag_counts[word].most_common(3))
        rows.append((word, shares, len(places), hits / len(places)))
        correct += hits
        majority_correct += hits[0]
        total += len(places)

    header = ("| word | train tags | held-out occurrences | "
              + " | ".join(f"layer {j}" + (" (= most frequent tag)" if j == 0 else "")
                           for j in range(num_layers)) + " |")
    lines = ["1-NN tagging of ambiguous words by biLM layer (nearest training occurrence of the "
             "same word, cosine), People's Daily held-out:", "", header,
             "|" + "---|" * (3 + num_layers)]
    for word, shares, count, accuracy in rows:
        lines.append(f"| {word} | {shares} | {count} | "
                     + " | ".join(f"{a:.1%}" for a in accuracy) + " |")
    lines.append(f"| all | | {total} | "
                 + " | ".join(f"**{c / total:.1%}**" for c in correct) + " |")
    lines += ["", f"{time.perf_counter() - start:.0f} s. Command: `python examples/senses.py "
              + " ".join(argv if argv is not None else sys.argv[1:]) + "`", ""]
    table = "\n".join(lines)
    print(table)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "senses.md"), "w", encoding="utf-8") as f:
            f.write(table)
    return {"words": [r[0] for r in rows], "accuracy": (correct / total).tolist(),
            "occurrences": total}


if __name__ == "__main__":
    main()
