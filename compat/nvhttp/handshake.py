"""The host side of one PIN pairing handshake, as a small state machine with no I/O.

Phases, each answered by one method (anything out of order raises `HandshakeError`):
  waiting_pin --accept_pin--> cert_sent --client_challenge--> challenged
  --server_challenge_response--> responded --client_pairing_secret--> done

A wrong PIN is invisible to the host until the client proves (or fails to prove) knowledge of
the key in `client_pairing_secret`; the client itself usually notices first, after
`server_challenge_response`, and abandons the flow.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from pairing import crypto

WAITING_PIN = "waiting_pin"
CERT_SENT = "cert_sent"
CHALLENGED = "challenged"
RESPONDED = "responded"
DONE = "done"


class HandshakeError(Exception):
    """A request that cannot advance the handshake; the session ends with `paired=0`."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class HostIdentity:
    cert_pem: bytes
    private_key: rsa.RSAPrivateKey
    cert_signature: bytes


@dataclass
class ServerHandshake:
    client_cert: x509.Certificate
    salt: bytes
    host: HostIdentity
    randbytes: Callable[[int], bytes] = os.urandom
    phase: str = WAITING_PIN
    key: bytes | None = field(default=None, repr=False)
    _server_secret: bytes = field(default=b"", repr=False)
    _server_challenge: bytes = field(default=b"", repr=False)
    _client_hash: bytes = field(default=b"", repr=False)

    def __post_init__(self) -> None:
        if len(self.salt) != crypto.SALT_LEN:
            raise HandshakeError("Salt must be 16 bytes (32 hex characters)")

    def _expect(self, phase: str, what: str) -> None:
        if self.phase != phase:
            raise HandshakeError(f"Out of order call to {what}")

    def accept_pin(self, pin: str) -> bytes:
        """Derive the key from the PIN; returns the host certificate PEM (`plaincert`)."""
        self._expect(WAITING_PIN, "getservercert")
        if len(pin) != 4 or not pin.isascii() or not pin.isdigit():
            raise HandshakeError("PIN must be 4 digits")
        self.key = crypto.derive_key(self.salt, pin)
        self.phase = CERT_SENT
        return self.host.cert_pem

    def use_key(self, key: bytes) -> bytes:
        """Like `accept_pin` when another process already derived the key from the PIN."""
        self._expect(WAITING_PIN, "getservercert")
        if len(key) != crypto.KEY_LEN:
            raise HandshakeError("bad pairing key", status=500)
        self.key = key
        self.phase = CERT_SENT
        return self.host.cert_pem

    def client_challenge(self, encrypted: bytes) -> bytes:
        """Decrypt the client's random challenge; returns `challengeresponse` (48 bytes)."""
        self._expect(CERT_SENT, "clientchallenge")
        if len(encrypted) != crypto.BLOCK:
            raise HandshakeError("clientchallenge must be 16 bytes")
        challenge = crypto.aes_ecb_decrypt(self.key, encrypted)
        self._server_secret = self.randbytes(16)
        self._server_challenge = self.randbytes(16)
        digest = crypto.sha256(challenge + self.host.cert_signature + self._server_secret)
        self.phase = CHALLENGED
        return crypto.aes_ecb_encrypt(self.key, digest + self._server_challenge)

    def server_challenge_response(self, encrypted: bytes) -> bytes:
        """Store the client's hash; returns `pairingsecret` = secret || RSA signature of it."""
        self._expect(CHALLENGED, "serverchallengeresp")
        if len(encrypted) != crypto.HASH_LEN:
            raise HandshakeError("serverchallengeresp must be 32 bytes")
        self._client_hash = crypto.aes_ecb_decrypt(self.key, encrypted)
        self.phase = RESPONDED
        return self._server_secret + crypto.sign(self.host.private_key, self._server_secret)

    def client_pairing_secret(self, data: bytes) -> bool:
        """True when the client knew the PIN and owns the certificate it sent."""
        self._expect(RESPONDED, "clientpairingsecret")
        if len(data) <= 16:
            raise HandshakeError("clientpairingsecret too short")
        secret, signature = data[:16], data[16:]
        self.phase = DONE
        expected = crypto.sha256(self._server_challenge + self.client_cert.signature + secret)
        hash_ok = hmac.compare_digest(expected, self._client_hash)
        sig_ok = crypto.verify(self.client_cert, signature, secret)
        return hash_ok and sig_ok
