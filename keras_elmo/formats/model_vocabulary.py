"""A vocabulary model's token vocabulary in a model directory: char.dic and word.dic.

A vocabulary model (docs/model.md section 10) in the published layout keeps its
`TokenVocabulary` beside options.json and weights.hdf5, in ELMoForManyLangs' .dic format
(`keras_elmo.formats.dic_file`), read the way EFML's code uses it
(`keras_elmo.formats.efml_weights.dic_token_vocabulary`): a directory made by `keras-elmo
train --init-from EFML_DIR` holds EFML's own two files.

Example:
>>> save_vocabulary(bilm.vocabulary, "runs/zh")  # doctest: +SKIP
['runs/zh/char.dic', 'runs/zh/word.dic']
>>> files = resolve_model_files("runs/zh")  # doctest: +SKIP
>>> read_model_vocabulary(files, BiLMOptions.from_file(files.options_file))  # doctest: +SKIP
"""

import os

from keras_elmo.formats.dic_file import write_dic
from keras_elmo.formats.efml_weights import read_dic_vocabulary
from keras_elmo.formats.model_files import CHAR_DIC_FILE, OPTIONS_FILE, WORD_DIC_FILE


def read_model_vocabulary(files, options):
    """The `TokenVocabulary` of a vocabulary model in the published layout: char.dic (and
    word.dic) beside its options.json, checked against the options.

    Raises:
        FileNotFoundError: a .dic file the options need is missing.
        ValueError: the files do not fit the options (one line naming what differs).
    """
    where = os.path.dirname(files.options_file) or "."
    needed = [(CHAR_DIC_FILE, files.char_dic)]
    if options.has_word_embedding:
        needed.append((WORD_DIC_FILE, files.word_dic))
    for name, path in needed:
        if path is None:
            raise FileNotFoundError(
                f"{where} has no {name}: its {OPTIONS_FILE} describes a vocabulary model "
                f"(char_vocabulary{', with words' if options.has_word_embedding else ''}); "
                f"expected {' and '.join(n for n, _ in needed)} beside it (a vocabulary "
                "model is read from its directory, not from --options/--weights).")
    vocabulary = read_dic_vocabulary(files.char_dic, files.word_dic if options.has_word_embedding
                                     else None, options.max_characters_per_token)
    try:
        vocabulary.check_fits(options)
    except ValueError as error:
        raise ValueError(f"{files.char_dic}: {error}") from None
    return vocabulary


def save_vocabulary(vocabulary, directory):
    """Writes a `TokenVocabulary` as `directory/char.dic` (and `word.dic`), the files
    `read_model_vocabulary` reads; returns their paths."""
    v = vocabulary
    # The specials by EFML's names, <eow> first in a row (keras_elmo.formats.efml_weights).
    chars = {"<oov>": v.unknown_char, "<pad>": v.padding_char, "<eow>": v.begin_word_char,
             "<bow>": v.end_word_char, v.begin_sentence_token: v.begin_sentence_char,
             v.end_sentence_token: v.end_sentence_char, **v.chars}
    paths = [os.path.join(os.fspath(directory), CHAR_DIC_FILE)]
    write_dic(paths[0], chars)
    if vocabulary.has_words:
        paths.append(os.path.join(os.fspath(directory), WORD_DIC_FILE))
        write_dic(paths[1], {"<oov>": v.unknown_word, **v.words})
    return paths
