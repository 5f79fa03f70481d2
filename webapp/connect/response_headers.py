"""Headers added to every REST response: Kafka Connect's ``response.http.headers.config``.

Owns parsing the value (worker property, or ``RAFTCONNECT_REST_RESPONSE_HEADERS``) into rules and applying
them to a response, both for Django's middleware chain (:class:`ResponseHeadersMiddleware`) and the REST
fast path. Connect's format: a comma-separated list of ``[action] [header name]:[header value]``, a rule
whose value holds commas in double quotes, e.g.
``"add Cache-Control: no-cache, no-store, must-revalidate", add X-XSS-Protection: 1; mode=block``.
Actions as Connect's (Jetty's ``HeaderFilter``): ``set`` replaces the header, ``add`` adds a value to
it (here joined to the existing one with ``, ``: a Django response holds one value per name),
``setDate`` / ``addDate`` take a number of milliseconds from now and write that instant as an HTTP
date. Unlike Connect, a value may contain ``:`` (only the first one separates the name).

Imports nothing from Django at module level: ``workerconfig`` checks a properties file with it before
settings load.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["ENV", "HeaderRule", "parse_rules", "apply_rules", "ResponseHeadersMiddleware"]

ENV = "RAFTCONNECT_REST_RESPONSE_HEADERS"
_ACTIONS = ("set", "add", "setDate", "addDate")
_SPLIT = re.compile(r',(?=(?:[^"]*"[^"]*")*[^"]*$)')  # commas outside double quotes
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP header name (RFC 9110 token)


@dataclass(frozen=True)
class HeaderRule:
    """One rule: ``action`` (``set``, ``add``, ``setDate``, ``addDate``), header ``name`` and ``value``
    (for the date actions, milliseconds from now, as an int)."""

    action: str
    name: str
    value: str | int


def parse_rules(text: str | None) -> tuple[HeaderRule, ...]:
    """The rules of a ``response.http.headers.config`` value (empty or None: none).

    Raises ``ValueError`` naming the rule and what Connect expects: ``[action] [header name]:[header
    value]``, an action among ``set``, ``add``, ``setDate``, ``addDate``, a header name without
    spaces, and for the date actions a whole number of milliseconds.
    """
    rules = []
    for raw in _SPLIT.split(text or ""):
        rule = raw.strip()
        if rule.startswith('"') and rule.endswith('"') and len(rule) >= 2:
            rule = rule[1:-1].strip()
        if not rule:
            continue
        parts = rule.split(None, 1)
        expected = "expected '[action] [header name]:[header value]'"
        if len(parts) != 2 or ":" not in parts[1]:
            raise ValueError(f"response.http.headers.config: invalid rule {rule!r}: {expected}")
        action, header = parts
        if action not in _ACTIONS:
            raise ValueError(f"response.http.headers.config: invalid action {action!r} in {rule!r}: expected one "
                             f"of {', '.join(_ACTIONS)}")
        name, value = (s.strip() for s in header.split(":", 1))
        if not _TOKEN.match(name):
            raise ValueError(f"response.http.headers.config: invalid header name {name!r} in {rule!r}: {expected}")
        if action.endswith("Date"):
            if not value.lstrip("-").isdigit():
                raise ValueError(f"response.http.headers.config: {action} needs milliseconds from now, got "
                                 f"{value!r} in {rule!r}")
            rules.append(HeaderRule(action, name, int(value)))
        else:
            rules.append(HeaderRule(action, name, value))
    return tuple(rules)


def apply_rules(response: Any, rules: tuple[HeaderRule, ...], now: Callable[[], float] = time.time) -> None:
    """Apply ``rules`` in order to ``response`` (a Django ``HttpResponse``: ``get`` and item assignment)."""
    if not rules:
        return
    from django.utils.http import http_date

    for rule in rules:
        value = http_date(now() + rule.value / 1000) if rule.action.endswith("Date") else rule.value
        held = response.get(rule.name) if rule.action.startswith("add") else None
        response[rule.name] = f"{held}, {value}" if held else value


class ResponseHeadersMiddleware:
    """Applies ``settings.REST_RESPONSE_HEADER_RULES`` to every response of the middleware chain (in the chain
    only when there are rules; the fast path applies them itself)."""

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        from django.conf import settings

        response = self.get_response(request)
        apply_rules(response, settings.REST_RESPONSE_HEADER_RULES)
        return response
