"""The catalog as Markdown tables, for README.md (main models) and docs/pretrained.md (all).

A document holds a generated table between two marker lines; `main` or `all` says which:

    <!-- catalog-table: main -->
    | Name | Language | ... |
    <!-- /catalog-table -->

`python -m keras_elmo.pretrained.catalog_table README.md docs/pretrained.md` rewrites those
tables from catalog.json; `tests/test_pretrained_catalog.py` fails when a document's table
differs from what this module makes of the catalog.

Example:
>>> print(markdown_table(load_catalog(), "main").splitlines()[0])
| Name | Language | Format | LSTM / projection | Output | Trained on |
"""

import re
import sys

from keras_elmo.pretrained.archives import SUFFIXES
from keras_elmo.pretrained.catalog import load_catalog

#: The marker lines around a generated table (`which`: "main" or "all").
_START = re.compile(r"^<!-- catalog-table: (main|all) -->$", re.MULTILINE)
_END = "<!-- /catalog-table -->"


def markdown_table(catalog, which):
    """The Markdown table of `catalog`'s main models (`which="main"`) or of all (`"all"`).

    Raises:
        ValueError: `which` is neither.
    """
    if which not in ("main", "all"):
        raise ValueError(f"Expected which='main' or 'all'. Received: which={which!r}")
    entries = [e for e in catalog if e.main or which == "all"]
    if which == "main":
        rows = [["Name", "Language", "Format", "LSTM / projection", "Output", "Trained on"]]
        rows += [[f"`{e.name}`", _language(e), _value(e.format), _sizes(e),
                  _value(e.output_dim), _value(e.training_data)] for e in entries]
    else:
        rows = [["Name", "Language", "Format", "LSTM / projection", "Output", "Parameters",
                 "Trained on", "Files", "Source"]]
        rows += [[f"`{e.name}`", _language(e), _value(e.format), _sizes(e),
                  _value(e.output_dim),
                  f"{e.parameters_millions:g} M" if e.parameters_millions else "?",
                  _value(e.training_data), _files(e),
                  f"[page]({e.source_page})" if e.source_page else "?"] for e in entries]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
              for row in rows[1:]]
    return "\n".join(lines)


def _language(entry):
    return f"{entry.language_name or entry.language} (`{entry.language}`)"


def _sizes(entry):
    if entry.lstm_dim is None and entry.projection_dim is None:
        return "?"
    return f"{_value(entry.lstm_dim)} / {_value(entry.projection_dim)}"


def _files(entry):
    if entry.layout == "archive":
        name = entry.files[0].file_name.lower()
        default = ".tar.gz" if entry.format == "tfhub-module" else ".archive"
        suffix = max((s for s in SUFFIXES if name.endswith(s)), key=len, default=default)
        return suffix[1:]
    return "options + weights"


def _value(value):
    return "?" if value is None else str(value)


def document_tables(text):
    """`[(which, start, end)]`: each generated table of a document's `text` (offsets of the
    table between its markers)."""
    found = []
    for match in _START.finditer(text):
        end = text.find(_END, match.end())
        if end < 0:
            raise ValueError(f"a '{match.group(0)}' marker has no '{_END}' after it.")
        found.append((match.group(1), match.end() + 1, end))
    return found


def rewrite_document(text, catalog):
    """`text` with each generated table made again from `catalog`."""
    for which, start, end in reversed(document_tables(text)):
        text = text[:start] + markdown_table(catalog, which) + "\n" + text[end:]
    return text


def main(paths):
    """Rewrites the tables of the documents `paths`; returns the exit code."""
    catalog = load_catalog(user_file="")
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        new = rewrite_document(text, catalog)
        if new != text:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(new)
            print(f"rewrote the catalog tables of {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["README.md", "docs/pretrained.md"]))
