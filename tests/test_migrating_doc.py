"""docs/migrating.md shows each library's snippet (the "peer" blocks) beside keras-elmo's.

Its keras-elmo blocks run, as written, in tests/test_docs_run.py (with every document's)."""

import os
import re

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                   "migrating.md")
_BLOCK = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.S | re.M)


def _blocks():
    """`(language, code)` of the keras-elmo blocks, in order."""
    text = open(DOC, encoding="utf-8").read()
    return [(info.strip(), code) for info, code in _BLOCK.findall(text)
            if info.strip() in ("python", "bash")]


def test_the_doc_has_blocks_for_each_library():
    languages = [language for language, _ in _blocks()]
    assert languages.count("python") >= 5 and languages.count("bash") >= 4
    text = open(DOC, encoding="utf-8").read()
    for old in ("hub.Module", "hub.KerasLayer", "ElmoEmbedder", "allennlp elmo",
                "BidirectionalLanguageModel", "dump_bilm_embeddings", "train_elmo.py",
                "stateful=True"):
        assert old in text, old
