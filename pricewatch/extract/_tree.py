"""Parse a page once into an lxml tree that every extractor shares.

Bytes are handed to lxml as UTF-8 when they decode as such (most pages), else decoded by
w3lib's HTML encoding detection (BOM, ``<meta charset>``, then a safe fallback). Nothing
here raises: unparseable input gives ``None``.
"""

from __future__ import annotations

import lxml.etree
import lxml.html
from w3lib.encoding import html_to_unicode

_UTF8_PARSER = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True)
_TEXT_PARSER = lxml.html.HTMLParser(remove_comments=True)


def parse(body: bytes | str) -> lxml.html.HtmlElement | None:
    """The document root of ``body``, or None when there is no document."""
    try:
        if isinstance(body, str):
            text = body.replace("\x00", "")
            if not text.strip():
                return None
            # lxml refuses str input that declares an encoding; bytes avoid that.
            return _parse_bytes(text.encode("utf-8", "surrogatepass"), _UTF8_PARSER)
        if not body or not body.strip():
            return None
        if body.startswith(b"\xef\xbb\xbf"):
            body = body[3:]
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            _, text = html_to_unicode(None, body)
            return _parse_bytes(text.replace("\x00", "").encode("utf-8", "replace"), _UTF8_PARSER)
        return _parse_bytes(body.replace(b"\x00", b""), _UTF8_PARSER)
    except (ValueError, lxml.etree.LxmlError, UnicodeError):
        return None


def _parse_bytes(data: bytes, parser: lxml.html.HTMLParser) -> lxml.html.HtmlElement | None:
    root = lxml.html.document_fromstring(data, parser=parser)
    return root if root is not None else None
