"""Parse a page once into an lxml tree that every extractor shares.

Bytes are handed to lxml as UTF-8 when they decode as such (most pages), else decoded by
w3lib's HTML encoding detection (BOM, ``<meta charset>``, then a safe fallback). Nothing
here raises: unparseable input gives ``None``.
"""

from __future__ import annotations

import lxml.etree
from w3lib.encoding import html_body_declared_encoding, html_to_unicode

# Plain etree elements: lxml.html's element classes cost a Python call per element proxy.
_UTF8_PARSER = lxml.etree.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)


def parse(body: bytes | str) -> lxml.etree._Element | None:
    """The document root of ``body``, or None when there is no document."""
    try:
        if isinstance(body, str):
            text = body.replace("\x00", "") if "\x00" in body else body
            if not text or text.isspace():
                return None
            # lxml refuses str input that declares an encoding; bytes avoid that.
            return _parse_bytes(text.encode("utf-8", "surrogatepass"), _UTF8_PARSER)
        if not body or body.isspace():
            return None
        if body.startswith(b"\xef\xbb\xbf"):
            body = body[3:]
        if b"\x00" in body:
            body = body.replace(b"\x00", b"")
        declared = html_body_declared_encoding(body[:4096])
        if declared and declared.replace("-", "").lower() == "utf8":
            return _parse_bytes(body, _UTF8_PARSER)
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            _, text = html_to_unicode(None, body)
            return _parse_bytes(text.encode("utf-8", "replace"), _UTF8_PARSER)
        return _parse_bytes(body, _UTF8_PARSER)
    except (ValueError, lxml.etree.LxmlError, UnicodeError):
        return None


def _parse_bytes(data: bytes, parser: lxml.etree.HTMLParser) -> lxml.etree._Element | None:
    root = lxml.etree.fromstring(data, parser=parser)
    if root is None or not isinstance(root.tag, str):
        return None
    return root


def text_of(el: lxml.etree._Element, limit: int | None = None) -> str:
    """All text inside ``el`` (``text_content()`` for plain etree elements); with ``limit``,
    stops soon after that many characters (callers that only want short texts)."""
    try:
        if limit is None:
            return "".join(el.itertext())
        parts = []
        size = 0
        for piece in el.itertext():
            parts.append(piece)
            size += len(piece)
            if size > limit:
                break
        return "".join(parts)
    except ValueError:
        return ""


def hidden_element(el: lxml.etree._Element) -> bool:
    """``el`` itself is hidden by an inline style or the ``hidden`` attribute."""
    style = el.get("style")
    if style and "none" in style:
        compact = style.replace(" ", "").lower()
        if "display:none" in compact or "visibility:hidden" in compact:
            return True
    return el.get("hidden") is not None


def hidden(el: lxml.etree._Element) -> bool:
    """``el`` or an ancestor is hidden by an inline style or the ``hidden`` attribute."""
    return hidden_element(el) or any(hidden_element(a) for a in el.iterancestors())
