"""Held-out perplexity of the interpolated Kneser-Ney trigram baseline, both directions.

Uses the biLM's vocabulary file (OOV -> <UNK>) and predicts every token and the closing
</S> of each sentence, like the biLM's perplexity. Prints one `name: value` line each for
forward ppl, backward ppl, average ppl, train tokens, heldout tokens, seconds.

Example:
    python benchmarks/ngram_baseline.py --train data/pd/train.txt \
        --heldout data/pd/heldout.txt --vocab data/pd/vocab.txt
    python benchmarks/ngram_baseline.py --train raw/train.txt --heldout raw/heldout.txt \
        --vocab raw/vocab.txt --tokenizer jieba     # raw Chinese, segmented as the biLM's
"""

import argparse
import os
import sys


from keras_elmo.training.corpus import expand_corpus  # noqa: E402
from keras_elmo.evaluation.ngram_baseline import evaluate_baseline  # noqa: E402
from keras_elmo.training.vocabulary import Vocabulary  # noqa: E402
from keras_elmo.text.tokenizers import TOKENIZERS  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", required=True, nargs="+", help="training text file(s)/glob(s)")
    parser.add_argument("--heldout", required=True, nargs="+", help="held-out file(s)/glob(s)")
    parser.add_argument("--vocab", required=True, help="vocabulary file (<S>, </S>, <UNK> first)")
    parser.add_argument("--discount", type=float, default=None,
                        help="one fixed discount in (0, 1] (default: modified KN, estimated)")
    parser.add_argument("--tokenizer", choices=TOKENIZERS, default="whitespace",
                        help="how lines become tokens: the biLM's own (default whitespace)")
    args = parser.parse_args(argv)
    try:
        vocabulary = Vocabulary.load(args.vocab)
        results = evaluate_baseline(expand_corpus(args.train), expand_corpus(args.heldout),
                                    vocabulary, discount=args.discount,
                                    tokenizer=args.tokenizer)
    except (ValueError, OSError) as error:
        print(f"ngram_baseline: error: {error}", file=sys.stderr)
        return 2
    print(f"forward ppl: {results['forward_perplexity']:.2f}")
    print(f"backward ppl: {results['backward_perplexity']:.2f}")
    print(f"average ppl: {results['average_perplexity']:.2f}")
    print(f"train tokens: {results['train_tokens']}")
    print(f"heldout tokens: {results['heldout_tokens']}")
    print(f"seconds: {results['seconds']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
