"""`keras-elmo neighbors`: nearest tokens-in-context to a word, and nearest types by layer 0.

Example:
    keras-elmo neighbors runs/people_daily_small --corpus data/people_daily/heldout.txt \\
        "他 会 说 英语 。" --word 会
    keras-elmo neighbors "他 会 说 英语 。" --word 会 --corpus heldout.txt \\
        --options my_options.json --weights my_weights.hdf5
    keras-elmo neighbors runs/pd_raw_jieba --corpus raw_heldout.txt "他在会上发言。" --word 会上
"""

import sys

from keras_elmo.cli.keras_start import check_keras, start_keras
from keras_elmo.cli.model_args import add_model_arguments, model_files
from keras_elmo.cli.path_checks import TOKENS, check_text_inputs
from keras_elmo.cli.tokenizer_option import add_tokenizer_argument, resolve_tokenizer


def add_parser(subparsers):
    """Registers `neighbors` (no heavy imports here)."""
    parser = subparsers.add_parser(
        "neighbors", help="nearest tokens-in-context to a word in a sentence (paper Table 4)",
        description="Embeds SENTENCE and every sentence of --corpus (both tokenised by "
                    "--tokenizer, by default as MODEL_DIR was trained), and lists the corpus tokens "
                    "whose vectors in --layer are nearest (cosine) to WORD's in SENTENCE; "
                    "then, for contrast, the corpus types nearest to WORD by layer 0 (the "
                    "context-free char-CNN layer), which are the same in every sentence.")
    add_model_arguments(parser)
    parser.add_argument("sentence", metavar="SENTENCE",
                        help="the query sentence (raw text under jieba)")
    parser.add_argument("--corpus", required=True, metavar="FILE",
                        help="text file, one sentence per line")
    parser.add_argument("--word", required=True, metavar="WORD",
                        help="the query word (one of SENTENCE's tokens after --tokenizer)")
    parser.add_argument("--occurrence", type=int, default=1, metavar="N",
                        help="which occurrence of WORD in SENTENCE (default 1)")
    parser.add_argument("--layer", type=int, default=None, metavar="J",
                        help="biLM layer for the contextual neighbours: 0 = token layer, "
                             "L = top biLSTM layer (default L)")
    parser.add_argument("-k", "--top", type=int, default=10, metavar="K",
                        help="neighbours per list (default 10)")
    parser.add_argument("--max-sentences", type=int, default=None, metavar="N",
                        help="read only the corpus' first N lines")
    parser.add_argument("--batch-size", type=int, default=64, metavar="N",
                        help="sentences per biLM call (default 64)")
    parser.add_argument("--context", type=int, default=8, metavar="N",
                        help="tokens shown each side of a neighbour (default 8)")
    parser.add_argument("--vocab", metavar="FILE",
                        help="token cache vocabulary (default: MODEL_DIR/vocab.txt if present)")
    parser.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    add_tokenizer_argument(parser, from_model=True)
    parser.set_defaults(run=run)


def _excerpt(tokens, position, context):
    """The neighbour in brackets with `context` tokens each side (... where cut)."""
    start, end = max(0, position - context), min(len(tokens), position + context + 1)
    shown = tokens[start:position] + [f"[{tokens[position]}]"] + tokens[position + 1:end]
    return ("... " if start else "") + " ".join(shown) + (" ..." if end < len(tokens) else "")


def run(args):
    """Finds and prints both neighbour lists; returns the exit code."""
    for name in ("top", "batch_size", "occurrence"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1; received "
                             f"{getattr(args, name)}.")
    if args.context < 0:
        raise ValueError(f"--context must be >= 0; received {args.context}.")
    if args.max_sentences is not None and args.max_sentences < 1:
        raise ValueError(f"--max-sentences must be >= 1; received {args.max_sentences}.")
    from keras_elmo.embedding.inputs import find_word
    from keras_elmo.text.tokenizers import tokenize

    # One clear line for a bad path, model or query, before loading TF
    # (keras_elmo.cli.path_checks): the corpus is read once here, to name a line that is
    # not UTF-8 and to refuse a corpus without a word.
    check_text_inputs([args.corpus], "corpus file",
                      no_text=f"corpus {args.corpus} has no tokens (expected one tokenised "
                              "sentence per line).")
    check_keras("neighbors")  # before a model is downloaded
    files = model_files(args)
    vocab = args.vocab or files.vocab_file
    if vocab is not None:
        check_text_inputs([vocab], "vocabulary file", expected=TOKENS)
    tokenizer = resolve_tokenizer(args, files.options_file)
    tokens = tokenize([args.sentence], tokenizer)[0]
    find_word(tokens, args.word, args.occurrence)

    backend = start_keras("neighbors")  # KERAS_BACKEND: TensorFlow, JAX or PyTorch
    from keras_elmo.models.loading import load_bilm
    from keras_elmo.embedding.loaders import load_token_cache
    from keras_elmo.embedding.neighbors import find_neighbors

    bilm = load_bilm(files)
    bilm.trainable = False  # embedding only (see keras_elmo.embedding.token_cache)
    cache = load_token_cache(bilm, vocab) if vocab else None
    if not args.no_progress:  # once the model loaded: an error stays one line
        print(f"keras-elmo neighbors: {backend}; tokenizer {tokenizer}", file=sys.stderr,
              flush=True)
    result = find_neighbors(bilm, args.corpus, tokens, args.word, layer=args.layer,
                            k=args.top, occurrence=args.occurrence,
                            batch_size=args.batch_size, max_sentences=args.max_sentences,
                            token_cache=cache, progress=not args.no_progress,
                            tokenizer=tokenizer)
    top = bilm.num_output_layers - 1
    print(f"query: {_excerpt(tokens, result['position'], len(tokens))}"
          + ("" if tokenizer == "whitespace" else f"  (tokenizer {tokenizer})"))
    print(f"corpus: {args.corpus}: {result['corpus_sentences']:,} sentences, "
          f"{result['corpus_tokens']:,} tokens, {result['corpus_types']:,} types")
    print(f"\nnearest tokens in context (cosine, biLM layer {result['layer']} of 0..{top}):")
    for rank, n in enumerate(result["contextual"], start=1):
        print(f"{rank:3d}  {n.score:.3f}  line {n.line_number}: "
              f"{_excerpt(n.tokens, n.position, args.context)}")
    print("\nnearest types by layer 0 (char CNN, context-free: the same for every sentence):")
    for rank, n in enumerate(result["types"], start=1):
        print(f"{rank:3d}  {n.score:.3f}  {n.token}  ({n.count:,} in the corpus)")
    return 0
