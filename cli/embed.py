"""`keras-elmo embed`: ELMo vectors of a text file to HDF5 (AllenNLP's `elmo` layout).

Example:
    keras-elmo embed runs/people_daily_small sentences.txt elmo.hdf5
    keras-elmo embed runs/people_daily_small sentences.txt elmo.hdf5 --mixed --batch-size 32
    keras-elmo embed runs/pd_raw_jieba raw_chinese.txt elmo.hdf5   # jieba: the model's own
"""

import os

from keras_elmo.cli.tokenizer_option import add_tokenizer_argument, resolve_tokenizer


def add_parser(subparsers):
    """Registers `embed` (no heavy imports here)."""
    parser = subparsers.add_parser(
        "embed", help="write the ELMo vectors of a text file to HDF5 (AllenNLP layout)",
        description="Reads one sentence per line (UTF-8), tokenised by --tokenizer (by "
                    "default as MODEL_DIR was trained: tokens separated by whitespace, or raw "
                    "Chinese for a jieba model), and writes one dataset per line, named by its "
                    "0-based index: "
                    "float32 (L+1, n_tokens, 2*projection_dim), or (n_tokens, "
                    "2*projection_dim) with --mixed; plus 'sentence_to_index', one JSON "
                    "string mapping each line's text to its key (a repeated sentence maps to "
                    "its last line). An empty line gives a zero-length dataset. The file is "
                    "streamed; the output appears only when complete.")
    parser.add_argument("model_dir", metavar="MODEL_DIR",
                        help="directory with options.json and weights.hdf5")
    parser.add_argument("input", metavar="INPUT", help="text file, one sentence per line")
    parser.add_argument("output", metavar="OUTPUT.hdf5", help="HDF5 file to write (replaced)")
    parser.add_argument("--mixed", action="store_true",
                        help="write only the mixed vector per token: gamma * sum_j "
                             "softmax(s)_j h_j with --mix-weights or MODEL_DIR/scalar_mix.json "
                             "if present, else the even average of the layers")
    parser.add_argument("--mix-weights", metavar="FILE",
                        help="scalar_mix.json with trained mix weights (implies --mixed)")
    parser.add_argument("--batch-size", type=int, default=64, metavar="N",
                        help="sentences per biLM call (default 64); sentences are sorted by "
                             "length within windows of 32 batches")
    parser.add_argument("--vocab", metavar="FILE",
                        help="precompute the char-CNN output of these tokens once (token "
                             "cache; default: MODEL_DIR/vocab.txt if present); other tokens "
                             "use the char CNN")
    parser.add_argument("--no-token-cache", action="store_true",
                        help="run the char CNN on every token (no token cache)")
    parser.add_argument("--forget-sentences", action="store_true",
                        help="do not write sentence_to_index (saves its memory at the end)")
    parser.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    add_tokenizer_argument(parser, from_model=True)
    parser.set_defaults(run=run)


def run(args):
    """Embeds the file; prints a one-line summary; returns the exit code."""
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1; received {args.batch_size}.")
    if args.vocab and args.no_token_cache:
        raise ValueError("--vocab and --no-token-cache contradict each other; received both.")
    from keras_elmo.embedding.inputs import check_paths
    from keras_elmo.model_files import VOCAB_FILE, find_model_files

    # One clear line for a bad MODEL_DIR, before loading TF.
    _, _, found_mix = find_model_files(args.model_dir)
    check_paths(args.input, args.output)
    tokenizer = resolve_tokenizer(args, args.model_dir)
    mix_file = args.mix_weights
    if mix_file is None and args.mixed:
        mix_file = found_mix
    if args.mix_weights and not os.path.isfile(args.mix_weights):
        raise FileNotFoundError(f"mix weights file not found: {args.mix_weights}.")
    vocab = args.vocab
    if vocab is None and not args.no_token_cache:
        found = os.path.join(args.model_dir, VOCAB_FILE)
        vocab = found if os.path.isfile(found) else None
    if vocab is not None and not os.path.isfile(vocab):
        raise FileNotFoundError(f"vocabulary file not found: {vocab} (expected one token per "
                                "line).")

    from keras_elmo.embedding.embed_file import embed_file
    from keras_elmo.embedding.loaders import load_bilm, load_token_cache

    bilm = load_bilm(args.model_dir)
    cache = load_token_cache(bilm, vocab) if vocab else None
    output = "mixed" if (args.mixed or args.mix_weights) else "all"
    stats = embed_file(bilm, args.input, args.output, batch_size=args.batch_size,
                       output=output, mix_file=mix_file, token_cache=cache,
                       keep_sentence_index=not args.forget_sentences,
                       progress=not args.no_progress, tokenizer=tokenizer)
    shape = "(" + ", ".join(str(d) for d in stats["shape"]) + ")"
    index = ("no sentence_to_index" if stats["distinct_sentences"] is None else
             f"sentence_to_index of {stats['distinct_sentences']:,} distinct sentences")
    mix = {"all": "all layers", "mixed": f"mixed ({mix_file or 'even average'})"}[output]
    cached = (f"; token cache {len(cache):,} tokens, {cache.hits:,} hits, {cache.misses:,} "
              "char-CNN fallbacks" if cache else "")
    rate = stats["tokens"] / max(stats["seconds"], 1e-9)
    print(f"wrote {args.output}: {stats['sentences']:,} datasets {shape} float32, {mix}, "
          f"{stats['tokens']:,} tokens ({tokenizer}), {stats['empty_lines']:,} empty lines, "
          f"{index}; {stats['seconds']:.1f} s ({rate:,.0f} tokens/s){cached}")
    return 0
