"""The client this host uses to reach a member's v1 API: TLS pinned to the certificate
fingerprint the operator gave at join, checked before any request (and so the token) is sent.

Members run self-signed certificates (access/identity.py), so the chain and the host name
prove nothing; the pin proves it is the host the operator joined. A mismatch is refused with
no request written. Answers are bounded (`MAX_ANSWER_BYTES`): a member that floods cannot
grow this host's memory.

Nothing here imports Django.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import re
import socket
import ssl
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_ANSWER_BYTES = 1024 * 1024
TIMEOUT_S = 5.0
FINGERPRINT_RE = re.compile(r"[0-9a-f]{64}")
HOST_RE = re.compile(r"[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")


class MemberError(Exception):
    """The member could not be asked, or answered with something unusable. The message is
    safe to show (no token, no answer body)."""


class FingerprintMismatch(MemberError):
    pass


def normalise_url(value: object) -> str:
    """`https://host[:port]` (no path, query, credentials); ValueError says why not."""
    if not isinstance(value, str) or not 1 <= len(value) <= 255 or not value.isprintable():
        raise ValueError("url must be printable text of 1-255 characters")
    parts = urlsplit(value.strip())
    if parts.scheme != "https":
        raise ValueError("url must be https://host[:port] (members serve TLS)")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError("url must not carry credentials, a query or a fragment")
    if parts.path not in ("", "/"):
        raise ValueError("url must be the member's origin, without a path")
    host = parts.hostname or ""
    netloc_host = parts.netloc.rsplit("@", 1)[-1]
    netloc_host = netloc_host.rsplit(":", 1)[0] if not netloc_host.endswith("]") else netloc_host
    if not HOST_RE.fullmatch(netloc_host) or not host:
        raise ValueError("url has no valid host")
    try:
        port = parts.port or 443
    except ValueError:
        raise ValueError("url has an invalid port") from None
    shown = f"[{host}]" if ":" in host else host.lower()
    return f"https://{shown}:{port}"


def normalise_fingerprint(value: object) -> str:
    """SHA-256 of the certificate as 64 hex digits (colons and case as the operator likes)."""
    if not isinstance(value, str) or len(value) > 128:
        raise ValueError("fingerprint must be the certificate's SHA-256 (64 hex digits)")
    text = value.strip().lower().replace(":", "")
    if text.startswith("sha256"):
        text = text[6:].lstrip("/=")
    if not FINGERPRINT_RE.fullmatch(text):
        raise ValueError("fingerprint must be the certificate's SHA-256 (64 hex digits)")
    return text


def certificate_fingerprint(der: bytes) -> str:
    return hashlib.sha256(der).hexdigest()


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            raise MemberError(f"answered {self.status} with a body that is not JSON") from None


class MemberClient:
    """One keep-alive, pinned connection to a member (requests on it are serialised)."""

    def __init__(self, url: str, fingerprint: str, token: str, timeout: float = TIMEOUT_S):
        parts = urlsplit(url)
        self.host = parts.hostname or ""
        self.port = parts.port or 443
        self.fingerprint = fingerprint
        self._token = token
        self.timeout = timeout
        self._conn: http.client.HTTPSConnection | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the token
        return f"MemberClient({self.host}:{self.port})"

    def _context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the pin below is the check
        return context

    def connect(self, timeout: float | None = None) -> http.client.HTTPSConnection:
        """A new pinned connection; FingerprintMismatch before anything is written on it."""
        conn = http.client.HTTPSConnection(
            self.host, self.port, context=self._context(), timeout=timeout or self.timeout
        )
        try:
            conn.connect()
            der = conn.sock.getpeercert(binary_form=True) or b""
        except (OSError, ssl.SSLError) as exc:
            conn.close()
            raise MemberError(f"cannot connect: {_reason(exc)}") from None
        if not hmac.compare_digest(certificate_fingerprint(der), self.fingerprint):
            conn.close()
            raise FingerprintMismatch(
                "the member's certificate does not match the pinned fingerprint; nothing was sent"
            )
        return conn

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self._token}",
            "Accept": "application/json",
            **(extra or {}),
        }

    def request(
        self, method: str, path: str, body: object = None, max_bytes: int = MAX_ANSWER_BYTES
    ) -> Answer:
        """One request on the kept connection (a GET retried once on a stale one); an answer
        over `max_bytes` is refused."""
        payload = None if body is None else json.dumps(body).encode()
        extra = {"Content-Type": "application/json"} if payload is not None else None
        with self._lock:
            for attempt in (0, 1):
                fresh = self._conn is None
                if fresh:
                    self._conn = self.connect()
                try:
                    self._conn.request(method, path, body=payload, headers=self.headers(extra))
                    response = self._conn.getresponse()
                    data = response.read(max_bytes + 1)
                except (OSError, http.client.HTTPException) as exc:
                    self._drop()
                    if attempt == 0 and not fresh and method == "GET":
                        continue  # the member closed an idle keep-alive connection
                    raise MemberError(f"request failed: {_reason(exc)}") from None
                if len(data) > max_bytes:
                    self._drop()
                    raise MemberError(f"answer larger than {max_bytes} bytes")
                if response.will_close:
                    self._drop()
                return Answer(response.status, dict(response.getheaders()), data)
        raise AssertionError("unreachable")

    def get_json(self, path: str):
        answer = self.request("GET", path)
        if answer.status != 200:
            raise MemberError(f"GET {path} answered {answer.status}")
        return answer.json()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self._drop()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, socket.timeout | TimeoutError):
        return "timed out"
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or type(exc).__name__}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return type(exc).__name__
