"""The host side of the PIN handshake, driven by a client that follows moonlight-python's steps."""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from compat.nvhttp.handshake import DONE, HandshakeError, HostIdentity, ServerHandshake
from pairing import crypto
from tests.support.certs import identity, pem


def test_key_derivation_matches_the_known_answer():
    # Known-answer test from Sunshine's unit tests (reference B.5).
    salt = bytes.fromhex("ff5dc6eda99339a8a0793e216c4257c4")
    key = crypto.derive_key(salt, "5338")
    assert key.hex() == "5ea186ffba663c75aec82187ce502647"
    assert crypto.aes_ecb_encrypt(key, b"CLIENT CHALLENGE").hex() == (
        "741cd3d6890c16da39d53bca0893aaf0"
    )
    assert crypto.aes_ecb_decrypt(key, bytes.fromhex("741cd3d6890c16da39d53bca0893aaf0")) == (
        b"CLIENT CHALLENGE"
    )


def test_aes_refuses_partial_blocks():
    with pytest.raises(ValueError):
        crypto.aes_ecb_encrypt(b"k" * 16, b"short")


def host() -> HostIdentity:
    key, cert = identity(9)
    return HostIdentity(pem(cert), key, cert.signature)


class Client:
    """The client half, step for step as moonlight-python (and Moonlight) compute it."""

    def __init__(self, pin: str, n: int = 0):
        self.key_obj, self.cert = identity(n)
        self.salt = os.urandom(16)
        self.key = crypto.derive_key(self.salt, pin)
        self.challenge = os.urandom(16)
        self.secret = os.urandom(16)

    def client_challenge(self) -> bytes:
        return crypto.aes_ecb_encrypt(self.key, self.challenge)

    def answer(self, challengeresponse: bytes, host_cert_pem: bytes) -> tuple[bytes, bytes]:
        plain = crypto.aes_ecb_decrypt(self.key, challengeresponse)
        self.server_response, server_challenge = plain[:32], plain[32:48]
        digest = crypto.sha256(server_challenge + self.cert.signature + self.secret)
        return crypto.aes_ecb_encrypt(self.key, digest), server_challenge

    def pin_matches(self, pairingsecret: bytes, host_cert) -> bool:
        server_secret = pairingsecret[:16]
        expect = crypto.sha256(self.challenge + host_cert.signature + server_secret)
        return expect == self.server_response

    def pairing_secret(self) -> bytes:
        sig = self.key_obj.sign(self.secret, padding.PKCS1v15(), hashes.SHA256())
        return self.secret + sig


def run(pin_client: str, pin_host: str):
    c = Client(pin_client)
    hs = ServerHandshake(c.cert, c.salt, host())
    plaincert = hs.accept_pin(pin_host)
    assert plaincert == host().cert_pem
    enc_hash, _ = c.answer(hs.client_challenge(c.client_challenge()), plaincert)
    pairingsecret = hs.server_challenge_response(enc_hash)
    _, host_cert = identity(9)
    # The client checks the host's signature of its secret (the MITM check).
    assert crypto.verify(host_cert, pairingsecret[16:], pairingsecret[:16])
    return c, hs, pairingsecret, host_cert


def test_full_handshake_with_the_right_pin_verifies_both_sides():
    c, hs, pairingsecret, host_cert = run("1234", "1234")
    assert c.pin_matches(pairingsecret, host_cert)
    assert hs.client_pairing_secret(c.pairing_secret()) is True
    assert hs.phase == DONE


def test_wrong_pin_is_seen_by_the_client_and_fails_on_the_host():
    c, hs, pairingsecret, host_cert = run("1234", "4321")
    assert not c.pin_matches(pairingsecret, host_cert)
    # A client that goes on anyway cannot prove it knows the key.
    assert hs.client_pairing_secret(c.pairing_secret()) is False


def test_a_secret_signed_by_another_key_is_refused():
    c, hs, _, _ = run("1111", "1111")
    other_key, _ = identity(1)
    forged = c.secret + other_key.sign(c.secret, padding.PKCS1v15(), hashes.SHA256())
    assert hs.client_pairing_secret(forged) is False


def test_steps_out_of_order_and_replays_are_refused():
    c = Client("0000")
    hs = ServerHandshake(c.cert, c.salt, host())
    with pytest.raises(HandshakeError, match="Out of order"):
        hs.client_challenge(c.client_challenge())
    hs.accept_pin("0000")
    first = c.client_challenge()
    hs.client_challenge(first)
    with pytest.raises(HandshakeError, match="Out of order"):
        hs.client_challenge(first)  # replayed challenge


@pytest.mark.parametrize("bad", ["123", "12345", "12a4", "١٢٣٤", ""])
def test_pins_that_are_not_four_ascii_digits_are_refused(bad):
    c = Client("0000")
    hs = ServerHandshake(c.cert, c.salt, host())
    with pytest.raises(HandshakeError):
        hs.accept_pin(bad)


@pytest.mark.parametrize("length", [0, 8, 15, 17, 32])
def test_a_salt_of_the_wrong_length_is_refused(length):
    _, cert = identity(0)
    with pytest.raises(HandshakeError, match="Salt"):
        ServerHandshake(cert, b"s" * length, host())


def test_wrong_sized_challenges_are_refused():
    c = Client("0000")
    hs = ServerHandshake(c.cert, c.salt, host())
    hs.accept_pin("0000")
    with pytest.raises(HandshakeError):
        hs.client_challenge(b"x" * 15)


def test_client_certificates_must_parse_and_be_rsa():
    with pytest.raises(crypto.CertificateError):
        crypto.load_client_cert(b"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")
    with pytest.raises(crypto.CertificateError):
        crypto.load_client_cert(b"\x00\xff garbage")
    _, ec_cert = identity(0, "ec")
    with pytest.raises(crypto.CertificateError, match="RSA"):
        crypto.load_client_cert(pem(ec_cert))
    _, cert = identity(0)
    assert crypto.fingerprint(crypto.load_client_cert(pem(cert))) == crypto.fingerprint(cert)
