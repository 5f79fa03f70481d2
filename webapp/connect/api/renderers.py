"""The REST API's JSON renderer: DRF's ``JSONRenderer``, encoding with orjson where it writes the same JSON.

Owns how every response body of the REST API becomes bytes (``DEFAULT_RENDERER_CLASSES``). Large
bodies are why: ``GET /connectors?expand=status`` at 10,000 connectors of 10 tasks is about 7 MB
of JSON, which ``json.dumps`` took ~0.3 s to write on a shared 2-core machine, more than the whole
request's goal; orjson (a compiled encoder) writes the same in ~25 ms
(``benchmarks/scale/expand.py``). Must not change what a response says: the shapes are Kafka
Connect's, read by its clients and tools.
"""
from __future__ import annotations

import json
from typing import Any

import orjson
from rest_framework.renderers import JSONRenderer
from rest_framework.utils import encoders

__all__ = ["ConnectJSONRenderer"]


class _JSONEncoder(encoders.JSONEncoder):
    """DRF's encoder, which also writes an ``orjson.Fragment`` (JSON encoded beforehand, as the
    connector list's entries are: ``webapp.connect.listing``) as the value it encodes."""

    def default(self, obj: Any) -> Any:
        if isinstance(obj, orjson.Fragment):
            return json.loads(orjson.dumps(obj))
        return super().default(obj)

_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_LINE_SEPARATOR, _PARAGRAPH_SEPARATOR = "\u2028".encode(), "\u2029".encode()


class ConnectJSONRenderer(JSONRenderer):
    """DRF's ``JSONRenderer`` with orjson doing the encoding of the compact form.

    The bytes are DRF's with its settings (``COMPACT_JSON``, ``UNICODE_JSON``: compact separators,
    UTF-8 rather than ``\\u`` escapes, U+2028 and U+2029 escaped, keys in insertion order), except:

    * a float whose ``repr`` uses an exponent may be spelled otherwise (``1e-05`` as ``0.00001``,
      ``1e-07`` as ``1e-7``): the same number, which parses back to the same float;
    * NaN and infinities, which DRF's strict mode refuses with ``ValueError`` (a 500), become
      ``null``.

    An ``orjson.Fragment`` (JSON encoded beforehand) is written as is, and decoded for DRF's path.
    Anything orjson does not encode the way Python's ``json`` does goes to DRF's own path, whole:
    an indented body (``Accept: application/json; indent=4``), non-string dict keys, integers
    beyond 64 bits, nesting deeper than 254 levels, or any error. Types JSON has no form for
    (datetimes, decimals, lazy strings, dataclasses, ...) go through DRF's encoder's ``default``
    as they did before.
    """

    encoder_class = _JSONEncoder
    _default = staticmethod(encoders.JSONEncoder().default)

    def render(self, data: Any, accepted_media_type: str | None = None,
               renderer_context: dict[str, Any] | None = None) -> bytes:
        """The JSON of ``data`` as UTF-8 bytes (``b""`` for ``None``). Errors: as DRF's ``JSONRenderer``."""
        if data is None:
            return b""
        if (self.ensure_ascii or not self.compact
                or self.get_indent(accepted_media_type, renderer_context or {}) is not None):
            return super().render(data, accepted_media_type, renderer_context)
        try:
            out = orjson.dumps(data, default=self._default, option=_OPTIONS)
        except orjson.JSONEncodeError:
            return super().render(data, accepted_media_type, renderer_context)
        if _LINE_SEPARATOR in out:
            out = out.replace(_LINE_SEPARATOR, b"\\u2028")
        if _PARAGRAPH_SEPARATOR in out:
            out = out.replace(_PARAGRAPH_SEPARATOR, b"\\u2029")
        return out
