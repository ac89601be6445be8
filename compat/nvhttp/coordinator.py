"""Pairing sessions of the nvhttp listener: at most one at a time, with timeouts and events.

Every Moonlight-family client sends the same `uniqueid`, so the uniqueid cannot tell devices
apart; the certificate fingerprint does. One handshake runs at a time: a second device that
knocks meanwhile is told "already pairing" (paired=1 without `plaincert`, which clients report
as such), the same device knocking again replaces its own stale attempt.

`getservercert` blocks its worker thread until a PIN arrives through the backend (another
process writes it), the PIN timeout passes, or the client hangs up. After the PIN, each next
phase must arrive within the step timeout; `reap()` ends sessions whose client vanished.
"""

from __future__ import annotations

import binascii
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from cryptography import x509

from common.names import sanitize_name
from compat.nvhttp.handshake import DONE, WAITING_PIN, HandshakeError, HostIdentity, ServerHandshake
from pairing import crypto

log = logging.getLogger(__name__)

PENDING = "pairing.pending"
COMPLETED = "pairing.completed"
DENIED = "pairing.denied"
# The PIN a trusted-subnet client that opts into auto-pairing (`trustedpair=1`) uses.
TRUSTED_PIN = "0000"


class PinGone:
    """`poll_pin` result: the waiting request was withdrawn (operator or host cleanup)."""


class PairingBackend(Protocol):
    def host_identity(self) -> HostIdentity: ...

    def auto_pair(self, remote: str, params: dict[str, str]) -> bool: ...

    def open_pin_request(self, *, device: str, fingerprint: str, salt: bytes, remote: str): ...

    def poll_pin(self, request_id) -> tuple[bytes, str] | PinGone | None: ...

    def close_pin_request(self, request_id) -> None: ...

    def store_client(self, cert: x509.Certificate, fingerprint: str, name: str) -> None: ...

    def emit(self, kind: str, name: str, fingerprint: str) -> None: ...


@dataclass
class Result:
    """What one /pair call answers: XML status plus the child elements."""

    status: int = 200
    message: str = ""
    fields: dict[str, str] = field(default_factory=dict)

    @classmethod
    def failed(cls, status: int, message: str) -> Result:
        return cls(status, message, {"paired": "0"})


@dataclass
class PairingAttempt:
    """One GameStream PIN pairing in progress (its handshake, deadline and outcome)."""

    uniqueid: str
    remote: str
    device: str
    fingerprint: str
    handshake: ServerHandshake
    deadline: float
    name: str = ""
    ended: threading.Event = field(default_factory=threading.Event)
    end_reason: str = ""


def _unhex(value: str | None, what: str) -> bytes:
    if not value:
        raise HandshakeError(f"Missing {what} parameter")
    try:
        return binascii.unhexlify(value.strip())
    except (binascii.Error, ValueError):
        raise HandshakeError(f"{what} is not hex") from None


class PairingCoordinator:
    def __init__(
        self,
        backend: PairingBackend,
        *,
        pin_timeout: float = 60.0,
        step_timeout: float = 30.0,
        knock_ttl: float = 600.0,
        poll_interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.backend = backend
        self.pin_timeout = pin_timeout
        self.step_timeout = step_timeout
        self.knock_ttl = knock_ttl
        self.poll_interval = poll_interval
        self.clock = clock
        self._lock = threading.Lock()
        self._session: PairingAttempt | None = None
        self._knocks: dict[str, float] = {}

    # -- state seen from outside ---------------------------------------------------------------
    @property
    def pin_pending(self) -> bool:
        s = self._session
        return s is not None and s.handshake.phase == WAITING_PIN

    # -- phase 1 -------------------------------------------------------------------------------
    def get_server_cert(
        self,
        *,
        uniqueid: str,
        remote: str,
        params: dict[str, str],
        cancelled: threading.Event | None = None,
    ) -> Result:
        """Validate the knock, then wait for the PIN (or auto-pair) and send the host cert."""
        cancelled = cancelled or threading.Event()
        device = sanitize_name(params.get("devicename", ""))
        try:
            salt = _unhex(params.get("salt"), "salt")
            if len(salt) != crypto.SALT_LEN:
                raise HandshakeError("Salt must be 16 bytes (32 hex characters)")
            cert = crypto.load_client_cert(_unhex(params.get("clientcert"), "clientcert"))
        except HandshakeError as exc:
            return Result.failed(exc.status, exc.message)
        except crypto.CertificateError:
            return Result.failed(400, "clientcert is not a valid certificate")
        fp = crypto.fingerprint(cert)
        auto = self.backend.auto_pair(remote, params)
        handshake = ServerHandshake(cert, salt, self.backend.host_identity())
        with self._lock:
            self._reap_locked()
            current = self._session
            if current is not None and current.fingerprint != fp:
                busy = True
            else:
                busy = False
                if current is not None:
                    self._end_locked(current, "replaced")
                timeout = self.step_timeout if auto else self.pin_timeout
                session = PairingAttempt(
                    uniqueid, remote, device, fp, handshake, self.clock() + timeout
                )
                self._session = session
        if busy:
            self._knock(device, fp)
            self.backend.emit(DENIED, device, fp)
            log.info("pairing refused for %s: another pairing is in progress", fp[:12])
            return Result(200, "", {"paired": "1"})  # no plaincert: "already in progress"
        if auto:
            log.info("trusted-subnet auto-pairing for %s from %s", fp[:12], remote)
            return self._cert_sent(session, handshake.accept_pin(TRUSTED_PIN), device)
        self._knock(device, fp)
        return self._wait_for_pin(session, salt, cancelled)

    def _wait_for_pin(
        self, session: PairingAttempt, salt: bytes, cancelled: threading.Event
    ) -> Result:
        request_id = self.backend.open_pin_request(
            device=session.device, fingerprint=session.fingerprint, salt=salt, remote=session.remote
        )
        try:
            while True:
                if session.ended.is_set():
                    return Result.failed(400, f"Pairing ended ({session.end_reason})")
                if cancelled.is_set():
                    self._finish(session, "client went away", deny=True)
                    return Result.failed(400, "Client went away")
                if self.clock() > session.deadline:
                    self._finish(session, "no PIN in time", deny=True)
                    return Result.failed(408, "No PIN was entered in time")
                got = self.backend.poll_pin(request_id)
                if isinstance(got, PinGone):
                    self._finish(session, "withdrawn", deny=True)
                    return Result.failed(400, "Pairing request was withdrawn")
                if got is not None:
                    key, name = got
                    with self._lock:
                        if self._session is not session:
                            return Result.failed(400, "Pairing ended")
                        try:
                            plaincert = session.handshake.use_key(key)
                        except HandshakeError as exc:
                            self._end_locked(session, exc.message, deny=True)
                            return Result.failed(exc.status, exc.message)
                    return self._cert_sent(session, plaincert, name or session.device)
                cancelled.wait(self.poll_interval)
        finally:
            if session.handshake.phase == WAITING_PIN and not session.ended.is_set():
                self._finish(session, "listener error", deny=True)  # never leave it parked
            self.backend.close_pin_request(request_id)

    def _cert_sent(self, session: PairingAttempt, plaincert: bytes, name: str) -> Result:
        session.name = sanitize_name(name) if name else session.device
        session.deadline = self.clock() + self.step_timeout
        return Result(200, "", {"paired": "1", "plaincert": plaincert.hex().upper()})

    # -- phases 2 to 4 -------------------------------------------------------------------------
    def client_challenge(self, uniqueid: str, remote: str, value: str) -> Result:
        return self._step(uniqueid, remote, "clientchallenge", value)

    def server_challenge_response(self, uniqueid: str, remote: str, value: str) -> Result:
        return self._step(uniqueid, remote, "serverchallengeresp", value)

    def client_pairing_secret(self, uniqueid: str, remote: str, value: str) -> Result:
        return self._step(uniqueid, remote, "clientpairingsecret", value)

    def _step(self, uniqueid: str, remote: str, phase: str, value: str) -> Result:
        with self._lock:
            self._reap_locked()
            session = self._session
            if session is None or session.uniqueid != uniqueid or session.remote != remote:
                return Result.failed(400, "Invalid uniqueid")
            try:
                data = _unhex(value, phase)
                hs = session.handshake
                if phase == "clientchallenge":
                    out = {"challengeresponse": hs.client_challenge(data).hex().upper()}
                elif phase == "serverchallengeresp":
                    out = {"pairingsecret": hs.server_challenge_response(data).hex().upper()}
                else:
                    verified = hs.client_pairing_secret(data)
            except HandshakeError as exc:
                self._end_locked(session, exc.message, deny=True)
                return Result.failed(exc.status, exc.message)
            if phase != "clientpairingsecret":
                session.deadline = self.clock() + self.step_timeout
                return Result(200, "", {"paired": "1", **out})
            if not verified:
                self._end_locked(session, "wrong PIN or certificate", deny=True)
                return Result(200, "", {"paired": "0"})
            try:
                self.backend.store_client(hs.client_cert, session.fingerprint, session.name)
            except Exception:
                log.exception("storing the paired client failed")
                self._end_locked(session, "store failed", deny=True)
                return Result.failed(500, "Could not store the paired client")
            self._end_locked(session, "paired")
            self._knocks.pop(session.fingerprint, None)
        self.backend.emit(COMPLETED, session.name, session.fingerprint)
        log.info("paired %s as %r", session.fingerprint[:12], session.name)
        return Result(200, "", {"paired": "1"})

    # -- endings -------------------------------------------------------------------------------
    def abort(self, remote: str) -> bool:
        """A client's `/unpair` after it found the PIN wrong: end its handshake, if past the PIN."""
        with self._lock:
            s = self._session
            if s is None or s.remote != remote or s.handshake.phase == WAITING_PIN:
                return False
            self._end_locked(s, "client aborted", deny=True)
            return True

    def shutdown(self) -> None:
        """Release a request held for its PIN so the listener can stop at once."""
        with self._lock:
            if self._session is not None:
                self._end_locked(self._session, "host stopping")

    def reap(self) -> None:
        """End a session whose client stopped answering (called periodically)."""
        with self._lock:
            self._reap_locked()

    def _reap_locked(self) -> None:
        # A session still waiting for its PIN is timed out by its own waiting thread (which
        # answers the held request with 408); the reaper ends the ones whose client went quiet.
        s = self._session
        if s is not None and s.handshake.phase != WAITING_PIN and self.clock() > s.deadline:
            self._end_locked(s, "timed out", deny=True)

    def _finish(self, session: PairingAttempt, reason: str, deny: bool) -> None:
        with self._lock:
            if self._session is session:
                self._end_locked(session, reason, deny)

    def _end_locked(self, session: PairingAttempt, reason: str, deny: bool = False) -> None:
        if session.ended.is_set():
            return
        session.end_reason = reason
        session.ended.set()
        if self._session is session:
            self._session = None
        if session.handshake.phase != DONE or deny:
            log.info("pairing of %s ended: %s", session.fingerprint[:12], reason)
        if deny:
            self.backend.emit(DENIED, session.name or session.device, session.fingerprint)

    def _knock(self, device: str, fp: str) -> None:
        """`pairing.pending` once per device (again only after `knock_ttl` of silence)."""
        now = self.clock()
        with self._lock:
            last = self._knocks.get(fp)
            self._knocks[fp] = now
            for old in [k for k, t in self._knocks.items() if now - t > self.knock_ttl]:
                del self._knocks[old]
        if last is None or now - last > self.knock_ttl:
            self.backend.emit(PENDING, device, fp)
