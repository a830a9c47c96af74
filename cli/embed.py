"""`keras-elmo embed`: ELMo vectors of a text file to HDF5 (AllenNLP's `elmo` layout).

The flags of `allennlp elmo` work as there (`--all`, `--top`, `--average`,
`--use-sentence-keys`, `--forget-sentences`, `--batch-size`, `--options-file`,
`--weight-file`, `--cuda-device`).

Example:
    keras-elmo embed runs/people_daily_small sentences.txt elmo.hdf5
    keras-elmo embed runs/people_daily_small sentences.txt elmo.hdf5 --average --batch-size 32
    keras-elmo embed runs/pd_raw_jieba raw_chinese.txt elmo.hdf5   # jieba: the model's own
    keras-elmo embed runs/people_daily_small sentences.txt elmo.hdf5 --dtype bfloat16
    keras-elmo embed sentences.txt elmo.hdf5 --all \\
        --options-file elmo_2x4096_512_2048cnn_2xhighway_options.json \\
        --weight-file elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5
"""

import os
import sys

from keras_elmo import constants
from keras_elmo.cli.embed_beam import add_arguments as add_beam_arguments
from keras_elmo.cli.model_args import add_model_arguments, model_files
from keras_elmo.cli.path_checks import (MIX_WEIGHTS, TOKENS, check_json_input,
                                        check_text_inputs, check_writable)
from keras_elmo.cli.tokenizer_option import add_tokenizer_argument, resolve_tokenizer
from keras_elmo.embedding.bilm_runner import DEFAULT_MAX_TOKENS
from keras_elmo.cli.keras_start import check_keras, start_keras
from keras_elmo.text.sentence_windows import DEFAULT_MAX_LENGTH
from keras_elmo.validation import check_int


def add_parser(subparsers):
    """Registers `embed` (no heavy imports here)."""
    parser = subparsers.add_parser(
        "embed", help="write the ELMo vectors of a text file to HDF5 (AllenNLP layout)",
        description="Reads one sentence per line (UTF-8), tokenised by --tokenizer (by "
                    "default as the model was trained: tokens separated by whitespace, or raw "
                    "Chinese for a jieba model), and writes one dataset per line, named by its "
                    "0-based index (or by the sentence with --use-sentence-keys): float32 "
                    "(L+1, n_tokens, 2*projection_dim) with --all (the default), (n_tokens, "
                    "2*projection_dim) with --top, --average or --mixed; plus "
                    "'sentence_to_index', one JSON string mapping each line's text to its key "
                    "(a repeated sentence maps to its last line). An empty line gives a "
                    "zero-length dataset; an input without any token is written all the same, "
                    "with a warning on stderr. The file is streamed; the output appears only "
                    "when complete.")
    add_model_arguments(parser)
    parser.add_argument("input", metavar="INPUT", help="text file, one sentence per line")
    parser.add_argument("output", metavar="OUTPUT.hdf5", help="HDF5 file to write (replaced)")
    layers = parser.add_mutually_exclusive_group()
    layers.add_argument("--all", dest="output_format", action="store_const", const="all",
                        help="every layer, (L+1, n, 2P): the token layer first (default)")
    layers.add_argument("--top", dest="output_format", action="store_const", const="top",
                        help="the top biLSTM layer only, (n, 2P)")
    layers.add_argument("--average", dest="output_format", action="store_const",
                        const="average", help="the even average of the layers, (n, 2P)")
    layers.add_argument("--mixed", dest="output_format", action="store_const", const="mixed",
                        help="gamma * sum_j softmax(s)_j h_j with --mix-weights or "
                             "MODEL_DIR/scalar_mix.json if present, else the even average")
    parser.add_argument("--mix-weights", metavar="FILE",
                        help="scalar_mix.json with trained mix weights (implies --mixed)")
    parser.add_argument("--batch-size", type=int, default=64, metavar="N",
                        help="most rows per biLM call (default 64): a row holds one sentence "
                             "or several short ones back to back, each read from a zero "
                             "state; windows of N x 32 sentences are packed together")
    parser.add_argument("--max-tokens", default=str(DEFAULT_MAX_TOKENS), metavar="N",
                        help="most token positions per biLM call (rows x steps, each "
                             f"sentence's <S> and </S> counted; default {DEFAULT_MAX_TOKENS}): "
                             "a smaller budget holds fewer activations and runs slower "
                             "(docs/performance.md has the trade); 'none' for --batch-size "
                             "alone")
    parser.add_argument("--max-length", type=int, default=DEFAULT_MAX_LENGTH, metavar="N",
                        help="tokens per biLM window (default "
                             f"{DEFAULT_MAX_LENGTH}): a longer sentence is embedded in "
                             "windows of N tokens, one vector per token still")
    parser.add_argument("--use-sentence-keys", action="store_true",
                        help="name each dataset by its sentence instead of its line number "
                             "(then no sentence_to_index)")
    parser.add_argument("--forget-sentences", action="store_true",
                        help="do not write sentence_to_index (saves its memory at the end)")
    parser.add_argument("--vocab", metavar="FILE",
                        help="compute the char-CNN output of these tokens up front (token "
                             "cache; default: MODEL_DIR/vocab.txt if present); every other "
                             "token runs the char CNN once, when first met")
    parser.add_argument("--no-token-cache", action="store_true",
                        help="no vocabulary up front, not even MODEL_DIR/vocab.txt (every "
                             "token runs the char CNN once, when first met)")
    parser.add_argument("--cuda-device", type=int, default=None, metavar="N",
                        help="GPU to use (AllenNLP's flag): sets CUDA_VISIBLE_DEVICES before "
                             "Keras' backend loads; -1 runs on the CPU")
    parser.add_argument("--dtype", default="float32", choices=constants.DTYPES,
                        help="the biLM's precision: float32 (default) or bfloat16, an "
                             "explicit reduced-precision option: weights (half the memory) "
                             "and compute in bfloat16, the HDF5 weight file still float32; "
                             "faster on CPUs with AVX512_BF16 / AMX, vectors close to "
                             "float32's (docs/performance.md); the output stays float32")
    parser.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    parser.add_argument("--quiet", action="store_true",
                        help="print nothing on success (no progress line, no closing line); "
                             "errors are still one line on stderr")
    add_tokenizer_argument(parser, from_model=True)
    add_beam_arguments(parser)  # --runner: the Beam pipeline (cli/embed_beam.py)
    parser.set_defaults(run=run, output_format=None)


def _budget(text):
    """`--max-tokens`: a positive int, or "none" for no budget (None, as in Python)."""
    if text.strip().lower() == "none":
        return None
    try:
        return check_int("--max-tokens", int(text))
    except ValueError:
        raise ValueError(f"--max-tokens must be a positive int or 'none' (no budget); "
                         f"received {text!r}.") from None


def _say_no_tokens(input_path, output_path):
    """The warning of an input without tokens, which is embedded all the same (an empty
    dataset per blank line, `sentence_to_index`): one output per input, as a pipeline over
    many files expects, and one line saying so."""
    from keras_elmo.embedding.inputs import count_lines_and_words

    lines, _ = count_lines_and_words(input_path)
    said = (f"has no tokens ({lines:,} blank line{'' if lines == 1 else 's'}); writing "
            f"{output_path} all the same: {lines:,} zero-length dataset"
            f"{'' if lines == 1 else 's'}" if lines else
            f"has no sentences (0 lines); writing {output_path} all the same, without datasets")
    print(f"keras-elmo embed: warning: {input_path} {said}.", file=sys.stderr, flush=True)


def run(args):
    """Embeds the file; prints a one-line summary; returns the exit code."""
    check_int("--batch-size", args.batch_size)
    check_int("--max-length", args.max_length)
    max_tokens = _budget(args.max_tokens)
    if args.vocab and args.no_token_cache:
        raise ValueError("--vocab and --no-token-cache contradict each other; received both.")
    if args.mix_weights and args.output_format not in (None, "mixed"):
        raise ValueError(f"--mix-weights needs --mixed; received --{args.output_format}.")
    output_format = args.output_format or ("mixed" if args.mix_weights else "all")
    if args.runner is not None:  # OUTPUT is a folder of shards (cli/embed_beam.py)
        from keras_elmo.cli.embed_beam import run as run_pipeline

        return run_pipeline(args, output_format, max_tokens)
    from keras_elmo.embedding.inputs import check_paths

    # One clear line for a bad path or model, before loading TF (keras_elmo.cli.path_checks).
    check_paths(args.input, args.output)
    check_writable(args.output, "the ELMo vectors")
    empty = check_text_inputs([args.input], "input file")  # a line not UTF-8: named
    if args.mix_weights:
        check_json_input(args.mix_weights, *MIX_WEIGHTS)
    check_keras("embed")  # before a model is downloaded
    files = model_files(args)
    mix_file = args.mix_weights or (files.mix_file if output_format == "mixed" else None)
    vocab = None if args.no_token_cache else (args.vocab or files.vocab_file)
    if vocab is not None:
        check_text_inputs([vocab], "vocabulary file", expected=TOKENS)
    tokenizer = resolve_tokenizer(args, files.options_file)
    if empty and not args.quiet:  # written all the same: one file out per file in
        _say_no_tokens(args.input, args.output)
    if args.cuda_device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(args.cuda_device if args.cuda_device >= 0
                                                 else -1)
    if args.quiet:  # nothing on success: TensorFlow's native log lines after start-up too
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"  # (errors stay: ours are one Python line)
    backend = start_keras("embed")  # KERAS_BACKEND: TensorFlow, JAX or PyTorch
    from keras_elmo.embedding.embedder import ElmoEmbedder

    embedder = ElmoEmbedder(args.model_dir, options_file=args.options, weight_file=args.weights,
                            batch_size=args.batch_size, token_cache=vocab or False,
                            tokenizer=tokenizer, dtype=args.dtype,
                            max_length=args.max_length, max_tokens=max_tokens)
    if not (args.no_progress or args.quiet):  # once the model loaded: an error stays one line
        print(f"keras-elmo embed: {backend}; tokenizer {tokenizer}", file=sys.stderr,
              flush=True)
    stats = embedder.embed_file(args.input, args.output, output_format=output_format,
                                forget_sentences=args.forget_sentences,
                                use_sentence_keys=args.use_sentence_keys, mix_file=mix_file,
                                progress=not (args.no_progress or args.quiet))
    if args.quiet:
        return 0
    shape = "(" + ", ".join(str(d) for d in stats["shape"]) + ")"
    index = ("no sentence_to_index" if stats["distinct_sentences"] is None else
             f"sentence_to_index of {stats['distinct_sentences']:,} distinct sentences")
    layers = {"all": "all layers", "top": "top layer", "average": "even average",
              "mixed": f"mixed ({mix_file or embedder.trained_mix_source or 'even average'})"
              }[output_format]
    cache = embedder.token_cache
    cached = (f"; token cache {cache.vocabulary_size:,} tokens, {cache.hits:,} hits, "
              f"{cache.misses:,} char-CNN fallbacks" if vocab else "")
    rate = stats["tokens"] / max(stats["seconds"], 1e-9)
    print(f"wrote {args.output}: {stats['sentences']:,} datasets {shape} float32, {layers}, "
          f"{stats['tokens']:,} tokens ({tokenizer}), {stats['empty_lines']:,} empty lines, "
          f"{index}; {stats['seconds']:.1f} s ({rate:,.0f} tokens/s), peak memory "
          f"{stats['peak_memory_mib']:,.0f} MiB{cached}")
    return 0
