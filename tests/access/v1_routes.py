"""The management API's URL map, walked: every `/api/v1` pattern and the methods it answers."""

from __future__ import annotations

import re

from django.urls import URLResolver, get_resolver

from access.mgmt import V1_ROUTE_PREFIX

_SAMPLES = {"fingerprint": "a" * 64}


def _walk(patterns, prefix=""):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _walk(p.url_patterns, prefix + str(p.pattern))
        else:
            yield prefix + str(p.pattern), p.callback


def v1_routes() -> dict[str, set[str]]:
    """Pattern below /api/v1/ -> the methods its view implements (HEAD/OPTIONS left out)."""
    routes = {}
    for route, callback in _walk(get_resolver().url_patterns):
        if not route.startswith(V1_ROUTE_PREFIX):
            continue
        view = getattr(callback, "view_class", None)
        if view is None:
            methods = {"GET"}  # plain async views (the event stream) answer GET only
        else:
            methods = {m.upper() for m in view.http_method_names if hasattr(view, m)}
            methods -= {"HEAD", "OPTIONS"}
        routes[route[len(V1_ROUTE_PREFIX) :]] = methods
    return routes


def sample_path(route: str) -> str:
    """A concrete URL for a pattern: a fingerprint-shaped value, 1 for ints, `x` otherwise."""

    def fill(m: re.Match) -> str:
        conv, name = m.group(1), m.group(2)
        if name in _SAMPLES:
            return _SAMPLES[name]
        return "1" if conv == "int" else "x"

    return "/api/v1/" + re.sub(r"<(?:(\w+):)?(\w+)>", fill, route)
