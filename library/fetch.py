"""Bounded HTTP GET for art and cover downloads: a timeout, no redirects, a size cap."""

from __future__ import annotations

import urllib.error
import urllib.request


class FetchError(Exception):
    """The download failed; `status` is the HTTP status when the server answered."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect could lead off the allowed host; treat it as a failure instead.
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def get(url: str, timeout: float, max_bytes: int) -> bytes:
    if not url.startswith(("http://", "https://")):
        raise FetchError("only http(s) URLs are fetched")
    req = urllib.request.Request(url, headers={"User-Agent": "hostmgmt-library/1"})
    try:
        with _opener.open(req, timeout=timeout) as resp:
            if resp.status != 200:
                raise FetchError(f"HTTP {resp.status}", resp.status)
            data = resp.read(max_bytes + 1)
    except urllib.error.HTTPError as exc:
        raise FetchError(f"HTTP {exc.code}", exc.code) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise FetchError(f"download failed: {exc}") from None
    if len(data) > max_bytes:
        raise FetchError(f"larger than {max_bytes} bytes")
    return data
