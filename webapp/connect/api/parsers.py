"""The REST API's JSON parser: DRF's, with nesting too deep for the decoder answered as a parse error (400).

Python's decoder recurses once per nesting level; a body of thousands of
``[`` would otherwise surface as a ``RecursionError`` (500).
"""
from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

__all__ = ["ConnectJSONParser"]


class ConnectJSONParser(JSONParser):
    """DRF's JSONParser; ``RecursionError`` becomes :class:`ParseError` (400 in Connect's error body)."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON nesting is too deep") from None
