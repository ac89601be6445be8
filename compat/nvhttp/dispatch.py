"""Routing of nvhttp requests, independent of the server that carries them.

HTTP (base port): /serverinfo, /pair, /unpair. HTTPS (base - 5): the same plus /applist,
/appasset and whatever the streaming side registers (/launch, /resume, /cancel). Every HTTPS
request is authorized on its own against the paired-client store, so a client removed or
disabled a moment ago is refused on its very next request, whatever its TLS session says.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import parse_qsl

from compat.nvhttp import responses
from compat.nvhttp.coordinator import PairingCoordinator, Result
from pairing import crypto

log = logging.getLogger(__name__)

APP_VERSION = "7.1.431.-1"  # major 7: SHA-256 pairing; negative 4th part: Sunshine extensions
GFE_VERSION = "3.23.0.74"
MAX_QUERY_FIELDS = 64
SERVER_FREE = "SUNSHINE_SERVER_FREE"
SERVER_BUSY = "SUNSHINE_SERVER_BUSY"


@dataclass(frozen=True)
class ClientInfo:
    """A paired, enabled client, as an authorized HTTPS request carries it."""

    fingerprint: str
    name: str
    uuid: str
    cert_pem: str = ""


@dataclass
class NvRequest:
    path: str
    query: dict[str, str]
    https: bool
    remote: str
    local: str = ""
    peer_der: bytes | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    client: ClientInfo | None = None


@dataclass
class NvResponse:
    body: bytes
    content_type: str = "application/xml"


@dataclass(frozen=True)
class App:
    id: int
    title: str
    hdr: bool = False


class HostBackend(Protocol):
    def server_facts(self, client_name: str = "") -> dict: ...

    def authorized_client(self, fingerprint: str) -> ClientInfo | None: ...

    def unpair_client(self, fingerprint: str) -> bool: ...

    def current_game(self, fingerprint: str | None) -> int: ...

    def list_apps(self) -> list[App]: ...

    def cover_png(self, app_id: int) -> bytes | None: ...

    def tofu_offered(self, remote: str) -> bool: ...

    def mac_address(self, local: str) -> str: ...


Handler = Callable[[NvRequest], NvResponse]


def parse_query(raw: str | bytes) -> dict[str, str]:
    """Query parameters, first occurrence wins; `&&` and blank values are tolerated.

    Raises ValueError on more than MAX_QUERY_FIELDS fields.
    """
    if isinstance(raw, bytes):
        raw = raw.decode("latin-1")
    out: dict[str, str] = {}
    for key, value in parse_qsl(
        raw, keep_blank_values=True, max_num_fields=MAX_QUERY_FIELDS, errors="replace"
    ):
        out.setdefault(key, value)
    return out


def xml(status: int = 200, message: str = "", children=None, attrs=None) -> NvResponse:
    return NvResponse(responses.document(status, message, children, attrs))


def _result(result: Result) -> NvResponse:
    return xml(result.status, result.message, result.fields)


class Dispatcher:
    def __init__(self, backend: HostBackend, coordinator: PairingCoordinator):
        self.backend = backend
        self.coordinator = coordinator
        self.http_routes: dict[str, Handler] = {
            "serverinfo": self.serverinfo,
            "pair": self.pair,
            "unpair": self.unpair,
        }
        self.https_routes: dict[str, Handler] = {
            **self.http_routes,
            "applist": self.applist,
            "appasset": self.appasset,
        }

    def register(self, name: str, handler: Handler, *, http: bool = False) -> None:
        """Add a route (HTTPS, paired clients only; also plain HTTP when `http`)."""
        self.https_routes[name] = handler
        if http:
            self.http_routes[name] = handler

    def handle(self, req: NvRequest) -> NvResponse:
        """Answer one request; never raises (a bug answers an XML 500, logged)."""
        try:
            return self._handle(req)
        except Exception:
            log.exception("nvhttp %s failed", req.path)
            return xml(500, "Internal error")

    def _handle(self, req: NvRequest) -> NvResponse:
        name = req.path.strip("/")
        routes = self.https_routes if req.https else self.http_routes
        if req.https:
            fp = crypto.fingerprint_der(req.peer_der) if req.peer_der else None
            client = self.backend.authorized_client(fp) if fp else None
            if client is None:
                return NvResponse(responses.not_authorized(req.path))
            req.client = client
        handler = routes.get(name)
        if handler is None:
            return NvResponse(responses.not_found(req.path))
        return handler(req)

    # -- routes --------------------------------------------------------------------------------
    def serverinfo(self, req: NvRequest) -> NvResponse:
        # The codec offer may differ per client (its profile's hevc_mode / av1_mode).
        facts = self.backend.server_facts(req.client.name if req.client is not None else "")
        # The caller's own session (several clients may stream at once): busy means "yours".
        fp = req.client.fingerprint if req.https and req.client is not None else None
        game = self.backend.current_game(fp) if fp else 0
        local = req.local or "127.0.0.1"
        children: list[tuple[str, object]] = [
            ("hostname", facts["hostname"]),
            ("appversion", APP_VERSION),
            ("GfeVersion", GFE_VERSION),
            ("uniqueid", facts["uniqueid"]),
            ("HttpsPort", facts["https_port"]),
            ("ExternalPort", facts["http_port"]),
            ("MaxLumaPixelsHEVC", facts.get("max_luma_pixels_hevc", 0)),
            ("mac", self.backend.mac_address(local) if req.https else "00:00:00:00:00:00"),
            # Clients keep LocalIP as an IPv4 address; over native IPv6 send the placeholder.
            ("LocalIP", local if ":" not in local else "127.0.0.1"),
        ]
        if facts.get("external_ip"):
            children.append(("ExternalIP", facts["external_ip"]))
        children += [
            ("ServerCodecModeSupport", facts.get("codec_mode_support", 1)),
            ("PairStatus", 1 if req.client is not None else 0),
            ("currentgame", game),
            ("state", SERVER_BUSY if game else SERVER_FREE),
        ]
        if not req.https and self.backend.tofu_offered(req.remote):
            children.append(("TofuEnabled", 1))
        return xml(200, "", children)

    def pair(self, req: NvRequest) -> NvResponse:
        q = req.query
        uniqueid = q.get("uniqueid")
        if not uniqueid:
            return xml(400, "Missing uniqueid parameter", {"paired": 0})
        phrase = q.get("phrase")
        co = self.coordinator
        if phrase == "getservercert":
            return _result(
                co.get_server_cert(
                    uniqueid=uniqueid, remote=req.remote, params=q, cancelled=req.cancelled
                )
            )
        if phrase == "pairchallenge":
            # Reaching an HTTPS handler already proved the client certificate is paired.
            return xml(200, "", {"paired": 1 if req.client is not None else 0})
        if "clientchallenge" in q:
            return _result(co.client_challenge(uniqueid, req.remote, q["clientchallenge"]))
        if "serverchallengeresp" in q:
            return _result(
                co.server_challenge_response(uniqueid, req.remote, q["serverchallengeresp"])
            )
        if "clientpairingsecret" in q:
            return _result(co.client_pairing_secret(uniqueid, req.remote, q["clientpairingsecret"]))
        return xml(404, "Invalid pairing request", {"paired": 0})

    def unpair(self, req: NvRequest) -> NvResponse:
        if req.client is not None:
            self.backend.unpair_client(req.client.fingerprint)
        else:
            self.coordinator.abort(req.remote)
        return xml(200, "", {"paired": 0})

    def applist(self, req: NvRequest) -> NvResponse:
        apps = [
            ("App", responses.element(
                "App", {"IsHdrSupported": int(app.hdr), "AppTitle": app.title, "ID": app.id}
            ))
            for app in self.backend.list_apps()
        ]  # fmt: skip
        return xml(200, "", apps)

    def appasset(self, req: NvRequest) -> NvResponse:
        raw = req.query.get("appid", "")
        try:
            app_id = int(raw)
        except ValueError:
            return xml(400, "appid must be a decimal app id")
        png = self.backend.cover_png(app_id)
        if png is None:
            return xml(404, "No app with that id", attrs={"query": req.path})
        return NvResponse(png, "image/png")
