"""The REST API's JSON parser: DRF's, decoding with orjson where it reads the same, and too deep nesting as a 400.

Python's decoder recurses once per nesting level; a body of thousands of
``[`` would otherwise surface as a ``RecursionError`` (500).
"""
from __future__ import annotations

import codecs
import io
import re

import orjson
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding

__all__ = ["ConnectJSONParser", "LONG_DIGITS"]

_UTF8 = codecs.lookup("utf-8").name
#: a run of digits that may be an integer past 64 bits, which orjson reads as a float and ``json`` exactly
LONG_DIGITS = re.compile(rb"[0-9]{19}")


class ConnectJSONParser(JSONParser):
    """DRF's JSONParser with a compiled decoder in front; ``RecursionError`` becomes :class:`ParseError` (400).

    A UTF-8 body is read whole and decoded by orjson (every config write's body: DRF's decoder,
    through a codec stream reader, was ~5 % of a REST config write's CPU on the leader, issue 16).
    orjson refuses what DRF's strict mode refuses (``NaN``, ``Infinity``), and keeps the last of
    duplicate keys as ``json`` does. A body with a run of 19 or more digits (a number that may be
    an integer past 64 bits, which orjson would read as a float) and whatever orjson does not decode
    (lone surrogate escapes, numbers past a double's range, nesting past its limit, or any error) go
    to DRF's own path on the same bytes, which decodes them or answers with DRF's own message; so a
    body means what it meant before, and an error reads as before. Other charsets go to DRF's path
    directly.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        """The decoded body (any JSON value). Errors: :class:`ParseError` (400)."""
        encoding = get_encoding(parser_context or {})
        if codecs.lookup(encoding).name == _UTF8:
            body = stream.read()
            if not LONG_DIGITS.search(body):
                try:
                    return orjson.loads(body)
                except orjson.JSONDecodeError:
                    pass
            stream = io.BytesIO(body)
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON nesting is too deep") from None
