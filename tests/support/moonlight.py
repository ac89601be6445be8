"""Helpers for end-to-end pairing tests: a real Moonlight client, PIN entry, events, config."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time

import httpx
from moonlight_python import MoonlightClient
from moonlight_python.discovery import connect_to_server
from moonlight_python.http_client import NvHTTP
from moonlight_python.pairing import pair as mlp_pair


def wait_compat_plane(host, timeout: float = 30) -> None:
    """The compat child starts beside daphne; the host's readiness only covers daphne."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            r = httpx.get(f"http://127.0.0.1:{host.base_port}/serverinfo?uniqueid=1", timeout=2)
            if "<hostname>" in r.text:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the compat plane did not come up"
        time.sleep(0.1)


class Moonlight:
    """One Moonlight identity (its own key and certificate) talking to the live host."""

    def __init__(self, host, config_dir):
        self.host = host
        self.client = MoonlightClient(config_dir=str(config_dir))
        self.identity = self.client._identity
        self.server = connect_to_server("127.0.0.1", self.identity, host.base_port)
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.identity.cert_der).hexdigest()

    def start_pairing(self, pin: str, http: NvHTTP | None = None) -> None:
        def run():
            try:
                if http is None:
                    self.client.pair(self.server, pin=pin)
                else:
                    cert = mlp_pair(http, self.identity, pin, self.server)
                    self.server.server_cert_pem = cert
            except BaseException as exc:  # the test inspects it
                self.error = exc

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def wait_paired(self, timeout: float = 30) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "pairing did not finish"

    def apps(self):
        return self.client.apps(self.server)

    def https(self, command: str, args: str | None = None) -> str:
        http = NvHTTP(
            "127.0.0.1",
            self.identity,
            http_port=self.host.base_port,
            https_port=self.host.base_port - 5,
        )
        return http.open_https(command, args)


class TrustedPairHTTP(NvHTTP):
    """Opts into trusted-subnet auto-pairing the way TOFU-aware clients do (`trustedpair=1`)."""

    def open_http(self, command, arguments=None, timeout=5):
        if command == "pair" and arguments and "phrase=getservercert" in arguments:
            arguments += "&trustedpair=1"
        return super().open_http(command, arguments, timeout)


def post_pin(host, auth, pin: str, name: str, timeout: float = 20) -> dict:
    """POST /api/pin as soon as a device waits (the call answers status false until then)."""
    deadline = time.monotonic() + timeout
    with host.client(auth=auth) as c:
        while True:
            r = c.post("/api/pin", json={"pin": pin, "name": name})
            assert r.status_code == 200, r.text
            if r.json()["status"] or time.monotonic() > deadline:
                return r.json()
            time.sleep(0.1)


def pairing_events(host, fingerprint: str, kinds: set[str], timeout: float = 10) -> list[dict]:
    """Pairing events for this fingerprint from the SSE stream (replay first, then live)."""
    seen: list[dict] = []
    deadline = time.monotonic() + timeout
    headers = {"Authorization": f"Bearer {host.mgmt_token}"}
    with host.client(headers=headers) as c:
        try:
            with c.stream(
                "GET",
                "/api/v1/events?since=0&kinds=pairing.*",
                timeout=httpx.Timeout(timeout, read=timeout),
            ) as r:
                assert r.status_code == 200
                for line in r.iter_lines():
                    if line.startswith("data:"):
                        event = json.loads(line[5:])
                        if event.get("device", {}).get("fingerprint") == fingerprint:
                            seen.append(event)
                    if kinds <= {e["kind"] for e in seen} or time.monotonic() > deadline:
                        break
        except httpx.ReadTimeout:
            pass
    return seen


@contextlib.contextmanager
def host_config(host, values: dict[str, str]):
    """Set keys in the live host's config file (as an operator would), then remove them."""
    from hostconfig import store

    old = os.environ.get("HOST_STATE_DIR")
    os.environ["HOST_STATE_DIR"] = str(host.state_dir)
    try:
        before = {k: store.read_raw().get(k) for k in values}
        store.write(values)
        yield
    finally:
        store.write(before)
        if old is None:
            os.environ.pop("HOST_STATE_DIR", None)
        else:
            os.environ["HOST_STATE_DIR"] = old
