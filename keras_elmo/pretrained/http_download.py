"""Downloading one file over HTTP(S): resumed, retried, the next mirror, checked.

`download(urls, part_path, ...)` fills `part_path` with the file at the first of `urls` that
serves it, and returns its URL, size and sha256:

- resume: a `.part` file left by an earlier attempt (this process's or a killed one's) is
  continued with a `Range` request, guarded by `If-Range` (its ETag or Last-Modified), so a
  file changed upstream starts again from zero instead of mixing two versions;
- retries: a timeout, a dropped connection or a 5xx/429 answer retries the same URL
  `ATTEMPTS` times in all, waiting `BACKOFF_SECONDS` and then twice as long each time;
- the next URL at once on a 404/410, an access denied (401/403), a host that does not
  resolve or refuses connections, and an answer that is an HTML page (a login page, an
  error page) instead of the file;
- checks: the size the catalog states against the server's and against what arrived; the
  `.part` file's final size against the length the server announced (Content-Length, or
  Content-Range's total), before it is hashed; the sha256 the catalog states against the
  file's; a mismatch removes the `.part` file and tries the next URL;
- `Retry-After` on a 429 or 503 answer (seconds or an HTTP-date) sets the wait before the
  next attempt, within `RETRY_BUDGET_SECONDS` a file: a server asking for more is one
  reason in the final line, not a long silent sleep;
- an optional file (`optional=True`: an entry's vocabulary) that every URL says is not
  there (404/410, denied, no such host, an HTML page) is reported absent, not an error.

A server that stays silent longer than `timeout` seconds (`KERAS_ELMO_DOWNLOAD_TIMEOUT`)
fails the attempt. When every URL fails, one line lists each URL and why, and says what to
do: a `DownloadError` (exit 75: a rerun may succeed) or, for a URL the user gave that is
missing or answers HTML, a `BadURLError` (exit 2). A full disk is the storage one-liner
(`StorageError`). Standard library only (urllib, hashlib).

Example:
>>> result = download(["https://example.org/weights.hdf5"], "cache/.partial/x/weights.part",
...                   label="x weights.hdf5")  # doctest: +SKIP
>>> result.size, result.sha256  # doctest: +SKIP
"""

import contextlib
import dataclasses
import email.message
import email.utils
import hashlib
import http.client
import json
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from keras_elmo.process.atomic_file import remove_quietly
from keras_elmo.process.storage_errors import check_free_space, format_bytes, storage_guard
from keras_elmo.pretrained.download_progress import download_progress
from keras_elmo.pretrained.settings import MIRROR_VARIABLE, TIMEOUT_VARIABLE

#: Attempts per URL for what may pass (timeouts, dropped connections, 5xx, 429).
ATTEMPTS = 3
#: Seconds before the second attempt; doubled before each later one.
BACKOFF_SECONDS = 1.0
#: Seconds one file's retries may wait in all (backoff and `Retry-After` together); a server
#: asking for more is one line, not a long silent sleep.
RETRY_BUDGET_SECONDS = 60.0
#: The pause between attempts (a name of its own: the tests replace it).
_sleep = time.sleep
_CHUNK = 1 << 20
_USER_AGENT = "keras-elmo (+https://github.com/keras-elmo)"
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
_HTML_STARTS = (b"<!doctype html", b"<html", b"<head", b"<?xml")


class DownloadError(OSError):
    """No URL of a file could be downloaded, or what arrived was not the file; a rerun
    may succeed (exit 75)."""

    exit_code = 75


class BadURLError(ValueError):
    """A URL the user gave that is missing or serves an HTML page (exit 2)."""


@dataclasses.dataclass(frozen=True)
class DownloadResult:
    """What `download` fetched: the URL that served it, its size (bytes) and sha256, and the
    file name its server gave (`Content-Disposition`, else None); or, for an optional file
    that no URL has, None for those and why (`absent`)."""

    url: str
    size: int
    sha256: str
    absent: str = None
    filename: str = None


class _NextURL(Exception):
    """This URL cannot serve the file: go to the next one."""


class _Mismatch(_NextURL):
    """This URL serves another file than the catalog states (size, sha256): the next one."""


class _Retry(Exception):
    """This attempt failed in a way that may pass: retry the same URL (after `wait` seconds
    when the server said how long: `Retry-After`)."""

    def __init__(self, reason, wait=None):
        super().__init__(reason)
        self.wait = wait


def download(urls, part_path, label, size=None, sha256=None, timeout=30.0, progress=True,
             user_given=False, optional=False):
    """Downloads the file at the first URL of `urls` that serves it into `part_path`.

    Args:
        urls: the URLs of one file, the primary first.
        part_path: the file to fill; an existing one from the same URL is resumed. Its
            folder must exist; `part_path + ".json"` records the URL and validators. One
            writer a file: the caller gives each process its own (`fetch.py`).
        label: what it is, for the lines (`"elmo-small weights.hdf5"`).
        size, sha256: what the file must be, when known (None: not checked).
        timeout: seconds a server may stay silent.
        progress: bool, the progress line on stderr (`download_progress`).
        user_given: the URLs are the user's own: a missing file or an HTML answer is the
            user's mistake (`BadURLError`).
        optional: the file may be missing: when every URL answers that it is (404/410,
            access denied, no such host, an HTML page), the result says so (`absent`).

    Returns:
        `DownloadResult`.

    Raises:
        DownloadError: every URL failed (the line lists why), or the sha256 or size differs.
        BadURLError: with `user_given`, every URL was missing or answered HTML.
        StorageError: no room for the file, or its folder cannot be written.
    """
    failures = []
    budget = RETRY_BUDGET_SECONDS
    for url in urls:
        for attempt in range(ATTEMPTS):
            try:
                return _attempt(url, part_path, label, size, sha256, timeout, progress)
            except _NextURL as failure:
                kind = "other file" if isinstance(failure, _Mismatch) else "gone"
                failures.append((url, str(failure), kind))
                break
            except _Retry as failure:
                if attempt + 1 == ATTEMPTS:
                    failures.append((url, f"{failure} ({ATTEMPTS} attempts)", "passing"))
                    break
                wait = BACKOFF_SECONDS * 2 ** attempt if failure.wait is None else failure.wait
                if wait > budget:
                    failures.append((url, f"{failure}, asking to retry after {wait:g} s: more "
                                     f"than the {budget:g} s left of the retry budget "
                                     f"({RETRY_BUDGET_SECONDS:g} s a file)", "passing"))
                    break
                budget -= wait
                if failure.wait is not None and progress:
                    print(f"keras-elmo: {urllib.parse.urlsplit(url).netloc} answered {failure}; "
                          f"retrying {label} in {wait:g} s (Retry-After)", file=sys.stderr,
                          flush=True)
                _sleep(wait)
    reasons = "; ".join(f"{url}: {reason}" for url, reason, _ in failures)
    if optional and all(kind == "gone" for _, _, kind in failures):
        return DownloadResult(None, None, None, absent=reasons)
    if user_given and all(kind == "gone" for _, _, kind in failures):
        raise BadURLError(f"cannot download {label}: {reasons}; check the URL (it must serve "
                          "the file itself, not a page about it).")
    raise DownloadError(f"cannot download {label}: {reasons}; run the same command again "
                        f"later (a partial download resumes), or set {MIRROR_VARIABLE} to a "
                        "mirror that holds the file.")


def _attempt(url, part_path, label, size, sha256, timeout, progress):
    """One request for `url`, appending to `part_path`; raises `_NextURL` / `_Retry`."""
    offset, validator = _resumable(part_path, url)
    headers = {"User-Agent": _USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if validator:
            headers["If-Range"] = validator
    request = urllib.request.Request(url, headers=headers)
    host = urllib.parse.urlsplit(url).netloc
    try:
        response = urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - http(s) only
    except urllib.error.HTTPError as error:
        error.close()
        if error.code == 416:  # the range is past the end: start again
            _discard(part_path)
            raise _Retry("the partial download did not fit the file (416)") from None
        reason = f"{error.code} {error.reason}"
        if error.code in (429,) or error.code >= 500:
            wait = retry_after(error.headers) if error.code in (429, 503) else None
            raise _Retry(reason, wait) from None
        if error.code in (401, 403):
            reason += " (access denied)"
        raise _NextURL(reason) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
        raise _connection_failure(error, host, timeout) from None
    with response:
        return _receive(response, url, part_path, offset, label, size, sha256, timeout,
                        progress, host)


def _receive(response, url, part_path, offset, label, size, sha256, timeout, progress, host):
    status = response.status
    if status == 206:
        match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
        if not match or int(match.group(1)) != offset:
            _discard(part_path)
            raise _Retry("the server resumed at another byte than asked")
    elif offset:  # 200: the whole file again (changed upstream, or no Range support)
        _discard(part_path)
        offset = 0
    content_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if content_type in ("text/html", "application/xhtml+xml"):
        _discard(part_path)
        raise _NextURL(f"answers an HTML page ({content_type}), not the file")
    length = response.headers.get("Content-Length")
    total = offset + int(length) if length and length.isdigit() else None
    if status == 206 and match.group(3) != "*":
        total = int(match.group(3))
    if size is not None and total is not None and total != size:
        _discard(part_path)
        raise _Mismatch(f"serves {format_bytes(total)} ({total} bytes); the catalog states "
                        f"{size} bytes")
    if total is not None:
        check_free_space(part_path, total - offset, label)
    _record(part_path, url, response.headers, offset)
    meter = download_progress(label, total=total, start=offset, source=host, enabled=progress)
    received = offset
    first = offset == 0
    with _stopping(meter), storage_guard(part_path, label, intact="the part received so far "
                                         "is kept and resumes"):
        with open(part_path, "ab" if offset else "wb") as handle:
            while True:
                try:
                    chunk = response.read(_CHUNK)
                except (OSError, http.client.HTTPException) as error:
                    handle.flush()
                    raise _connection_failure(error, host, timeout) from None
                if not chunk:
                    break
                if first:
                    first = False
                    if chunk.lstrip()[:16].lower().startswith(_HTML_STARTS):
                        handle.close()
                        _discard(part_path)
                        raise _NextURL("answers a web page (HTML), not the file")
                handle.write(chunk)
                received += len(chunk)
                meter.update(len(chunk))
            handle.flush()
            os.fsync(handle.fileno())
            on_disk = os.fstat(handle.fileno()).st_size
    if total is not None and received < total:
        raise _Retry(f"the connection closed after {received} of {total} bytes")
    if total is not None and on_disk != total:  # before it is hashed or kept
        meter.stop()
        _discard(part_path)
        raise _Mismatch(f"the download {os.path.basename(part_path)} holds {on_disk} bytes "
                        f"({received} received); the server announced {total} (removed "
                        "before it was hashed or kept)")
    meter.close()
    return _checked(url, part_path, label, size, sha256,
                    _disposition_name(response.headers.get("Content-Disposition")))


@contextlib.contextmanager
def _stopping(meter):
    """`meter.stop()` when the body raises (the progress line ends before the error's)."""
    try:
        yield
    except BaseException:
        meter.stop()
        raise


def _checked(url, part_path, label, size, sha256, filename=None):
    """The `DownloadResult` of a complete `part_path`, after the stated size and sha256
    (a mismatch removes the file and tries the next URL)."""
    actual_size = os.path.getsize(part_path)
    digest = file_sha256(part_path)
    if size is not None and actual_size != size:
        _discard(part_path)
        raise _Mismatch(f"served {actual_size} bytes; the catalog states {size} (removed)")
    if sha256 is not None and digest != sha256:
        _discard(part_path)
        raise _Mismatch(f"served a file with sha256 {digest}; the catalog states {sha256}: "
                        "damaged in transfer or changed upstream (removed)")
    remove_quietly(part_path + ".json")
    return DownloadResult(url, actual_size, digest, filename=filename)


def _disposition_name(value):
    """The file name of a `Content-Disposition` header (`filename*=` or `filename=`), its
    folders dropped, or None.

    Example:
    >>> _disposition_name('attachment; filename="elmo_3.tar.gz"')
    'elmo_3.tar.gz'
    """
    if not value:
        return None
    message = email.message.Message()
    message["Content-Disposition"] = value
    name = message.get_filename()
    name = os.path.basename((name or "").replace("\\", "/")).strip()
    return name or None


def retry_after(headers, now=None):
    """The seconds a `Retry-After` header asks to wait (delay-seconds or an HTTP-date), or
    None (absent or not understood).

    Example:
    >>> retry_after({"Retry-After": "120"})
    120.0
    >>> retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:30 GMT"}, now=1445412480.0)
    30.0
    """
    value = (headers.get("Retry-After") or "").strip() if headers is not None else ""
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)


def file_sha256(path):
    """The sha256 (hex) of a file, read in blocks.

    Example:
    >>> file_sha256("/dev/null")
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _resumable(part_path, url):
    """`(bytes already there, If-Range validator)` of a `.part` file left from `url`."""
    try:
        with open(part_path + ".json", encoding="utf-8") as handle:
            record = json.load(handle)
        offset = os.path.getsize(part_path)
    except (OSError, ValueError):
        _discard(part_path)
        return 0, None
    if not isinstance(record, dict) or record.get("url") != url or not offset:
        _discard(part_path)
        return 0, None
    return offset, record.get("etag") or record.get("last_modified")


def _record(part_path, url, headers, offset):
    """Writes the `.part` file's URL and validators, which a later resume sends back."""
    record = {"url": url, "etag": headers.get("ETag"),
              "last_modified": headers.get("Last-Modified")}
    if record["etag"] and record["etag"].startswith("W/"):  # weak: not usable in If-Range
        record["etag"] = None
    with storage_guard(part_path, "the record of a partial download"):
        with open(part_path + ".json", "w", encoding="utf-8") as handle:
            json.dump(record, handle)


def _discard(part_path):
    remove_quietly(part_path)
    remove_quietly(part_path + ".json")


def _connection_failure(error, host, timeout):
    """The `_NextURL` (dead host) or `_Retry` (may pass) of a network error."""
    reason = getattr(error, "reason", error)
    if isinstance(reason, (TimeoutError, socket.timeout)) or "timed out" in str(reason):
        return _Retry(f"no answer from {host} within {timeout:g} s ({TIMEOUT_VARIABLE})")
    if isinstance(reason, socket.gaierror):
        return _NextURL(f"host {host} not found")
    if isinstance(reason, ConnectionRefusedError):
        return _NextURL(f"{host} refused the connection")
    if isinstance(reason, OSError) and getattr(reason, "errno", None) in (101, 113):
        return _NextURL(f"{host} cannot be reached (network unreachable)")
    if type(reason).__name__.startswith("SSL"):
        return _NextURL(f"TLS with {host} failed ({reason})")
    return _Retry(f"the connection to {host} failed ({type(reason).__name__}: {reason})")
