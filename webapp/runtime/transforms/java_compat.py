"""Java compatibility of the SMTs: regex replacement templates, ``SimpleDateFormat`` patterns, ``Double.toString``.

Owns the translation of what Kafka's transformations take and print in Java
terms into Python: ``Matcher.replaceFirst`` templates (``$1``, ``${name}``) for
RegexRouter, ``SimpleDateFormat`` patterns (formatting per column where Arrow can,
parsing per value) for TimestampConverter, TimestampRouter and Cast, and Java's
shortest float-to-string for Cast.

Must not touch: records, schemas or any transformation (pure functions of values
and patterns); nothing of the project is imported. pyarrow is imported lazily.
"""
from __future__ import annotations

import datetime as _dt
import functools

def _java_replacement(repl: str) -> str:
    """Java ``Matcher.replaceFirst`` replacement → Python ``re`` template (``$1``, ``${g}``, ``\\$``)."""
    out, i = [], 0
    while i < len(repl):
        c = repl[i]
        if c == "\\" and i + 1 < len(repl):
            out.append(repl[i + 1].replace("\\", "\\\\"))
            i += 2
        elif c == "$" and i + 1 < len(repl) and repl[i + 1] == "{":
            j = repl.index("}", i)
            out.append(f"\\g<{repl[i + 2:j]}>")
            i = j + 1
        elif c == "$":
            j = i + 1
            while j < len(repl) and repl[j].isdigit():
                j += 1
            if j == i + 1:
                raise ValueError(f"Illegal group reference in replacement {repl!r}")
            out.append(f"\\g<{repl[i + 1:j]}>")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _sdf_letter(c: str, width: int) -> str | None:
    """strftime directive for a run of one SimpleDateFormat letter (None: unsupported)."""
    if c == "y":
        return "%y" if width == 2 else "%Y"
    if c == "M":
        return "%m" if width <= 2 else ("%b" if width == 3 else "%B")
    if c == "E":
        return "%a" if width <= 3 else "%A"
    return {"d": "%d", "H": "%H", "h": "%I", "m": "%M", "s": "%S", "a": "%p", "D": "%j", "Z": "%z",
            "z": "%Z"}.get(c)


@functools.lru_cache(maxsize=64)
def _sdf_tokens(pattern: str) -> tuple[tuple[str, str], ...]:
    """Split a ``SimpleDateFormat`` pattern into ("strf", text) and ("ms", width) tokens.

    Supports y, M, d, H, h, m, s, S (milliseconds), a, E, D, Z, X (ISO zone), z and
    quoted literals (``''`` is a quote). Raises ValueError for other pattern letters.
    """
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            j = pattern.find("'", i + 1)
            if j < 0:
                raise ValueError(f"Unterminated quote in date format {pattern!r}")
            lit = "'" if j == i + 1 else pattern[i + 1:j]
            tokens.append(("strf", lit.replace("%", "%%")))
            i = j + 1
        elif c.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == c:
                j += 1
            if c == "S":
                tokens.append(("ms", str(j - i)))
            elif c == "X":  # ISO zone: "Z" for UTC, which is what we format in
                tokens.append(("X", ""))
            else:
                directive = _sdf_letter(c, j - i)
                if directive is None:
                    raise ValueError(f"Unsupported pattern letter {c!r} in date format {pattern!r}")
                tokens.append(("strf", directive))
            i = j
        else:
            tokens.append(("strf", c.replace("%", "%%")))
            i += 1
    return tuple(tokens)


def _format_ms(ms: int, pattern: str) -> str:
    """Format epoch ms in UTC with a SimpleDateFormat pattern."""
    d = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=ms)
    out = []
    for kind, text in _sdf_tokens(pattern):
        if kind == "ms":
            width = int(text)
            out.append(str(d.microsecond // 1000).zfill(width) if width >= 3 else str(d.microsecond // 1000))
        elif kind == "X":
            out.append("Z")
        else:
            out.append(d.strftime(text))
    return "".join(out)


def _format_ms_column(ms, pattern: str):
    """Format an int64 array of epoch ms (UTC) with a SimpleDateFormat pattern → string array (nulls kept).

    Columnar (Arrow ``strftime``) unless the pattern shows milliseconds or a zone,
    which are formatted per value.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    tokens = _sdf_tokens(pattern)
    if any(kind != "strf" or text in ("%z", "%Z") for kind, text in tokens):
        return pa.array([None if v is None else _format_ms(v, pattern) for v in ms.to_pylist()], pa.string())
    seconds = pc.cast(pc.cast(ms, pa.timestamp("ms", tz="UTC")), pa.timestamp("s", tz="UTC"), safe=False)
    return pc.strftime(seconds, format="".join(text for _, text in tokens), locale="C")


def _parse_ms(text: str, pattern: str) -> int:
    """Parse a string with a SimpleDateFormat pattern (UTC unless the pattern has a zone) → epoch ms."""
    fmt = "".join("%f" if kind == "ms" else ("%z" if kind == "X" else t) for kind, t in _sdf_tokens(pattern))
    d = _dt.datetime.strptime(text, fmt)
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    delta = d - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


def _java_double_str(x: float) -> str:
    """``Double.toString``: shortest digits; scientific (``1.0E7``) outside [1e-3, 1e7)."""
    import decimal
    import math

    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        r = repr(x)
        return r if "." in r else r + ".0"
    sign, digits, exp = decimal.Decimal(repr(x)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    exponent = len(digits) - 1 + exp
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{exponent}"
