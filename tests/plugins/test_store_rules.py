"""The store's address rule, catalog entry checks and job history, without a network."""

from __future__ import annotations

import pytest

from hooks import ssrf
from plugins.store import catalog, netfetch, signing
from plugins.store.sources import Source

SHA = "a" * 64


def _entry(**over):
    raw = {"id": "hello", "pkg": "host-plugin-hello", "version": "1.0", "title": "Hello",
           "wheel": {"url": "w/hello.whl", "sha256": SHA}}  # fmt: skip
    raw.update(over)
    return raw


@pytest.mark.parametrize(
    ("url", "loopback_ok"),
    [
        ("http://a.example/c.json", False),
        ("https://169.254.169.254/latest", True),
        ("https://[fe80::1]/c", True),
        ("https://0.0.0.0/c", True),
        ("https://user:pw@a.example/c", True),
        ("https://127.0.0.1/c", False),
        ("https://localhost/c", False),
        ("https://[::ffff:127.0.0.1]/c", False),
        ("https://2130706433/c", False),
    ],
)
def test_refused_urls(url, loopback_ok):
    with pytest.raises(ssrf.UrlRefused):
        netfetch.check_url(url, allow_loopback=loopback_ok)


def test_allowed_urls():
    netfetch.check_url("https://127.0.0.1:8443/c.json", allow_loopback=True)
    netfetch.check_url("https://192.168.1.10/c.json", allow_loopback=False)
    assert netfetch.is_loopback_url("https://127.0.0.1:1/x")
    assert not netfetch.is_loopback_url("https://a.example/x")


def test_a_remote_catalog_cannot_point_wheels_at_loopback():
    remote = Source("r", "https://plugins.example/c.json", "")
    local = Source("l", "https://127.0.0.1:8443/c.json", "")
    assert remote.loopback is False and local.loopback is True
    with pytest.raises(catalog.BadCatalog, match="loopback"):
        catalog.parse_entry(_entry(wheel={"url": "https://127.0.0.1/x.whl", "sha256": SHA}),
                            remote.url, remote.loopback)  # fmt: skip
    got = catalog.parse_entry(_entry(), local.url, local.loopback)
    assert got["wheel_url"] == "https://127.0.0.1:8443/w/hello.whl"


@pytest.mark.parametrize(
    "over",
    [
        {"pkg": "requests"},
        {"pkg": "host-plugin-Hello"},
        {"id": "../x"},
        {"version": "1 0"},
        {"wheel": {"url": "w.whl", "sha256": "abc"}},
        {"wheel": {"url": "http://a.example/w.whl", "sha256": SHA}},
        {"title": ""},
        {"title": "x" * 65},
        {"platforms": "linux"},
    ],
)
def test_entries_out_of_shape(over):
    with pytest.raises(catalog.BadCatalog):
        catalog.parse_entry(_entry(**over), "https://a.example/c.json", False)


def test_document_shape_and_counts():
    src = Source("r", "https://a.example/c.json", "")
    body = b'{"format": 1, "plugins": [%s, {"id": "x"}]}' % (
        b'{"id": "hello", "pkg": "host-plugin-hello", "version": "1", "title": "T", '
        b'"wheel": {"url": "w.whl", "sha256": "' + SHA.encode() + b'"}}'
    )
    entries, dropped = catalog.parse_document(body, src)
    assert [e["id"] for e in entries] == ["hello"] and dropped == 1
    for bad in (b"[]", b'{"format": 2, "plugins": []}', b"not json"):
        with pytest.raises(catalog.BadCatalog):
            catalog.parse_document(bad, src)


def test_signature_over_exact_bytes():
    key = signing.new_private_key()
    pub = signing.format_public_key(key.public_key())
    sig = signing.sign(key, b"catalog")
    assert signing.verify(pub, b"catalog", sig)
    assert not signing.verify(pub, b"catalog ", sig)
    assert not signing.verify(pub, b"catalog", b"!!!")
    other = signing.format_public_key(signing.new_private_key().public_key())
    assert not signing.verify(other, b"catalog", sig)
    for bad in ("ed25519:", "rsa:AAAA", "ed25519:" + "A" * 44):
        with pytest.raises(signing.BadKey):
            signing.parse_public_key(bad)


def test_twenty_jobs_kept(tmp_path, monkeypatch):
    from plugins.store import jobs

    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    for n in range(1, 24):
        jobs.Job.create(f"job-100-{n}", "install", "host-plugin-a@1", {}).finish()
    ids = [j["id"] for j in jobs.list_jobs()]
    assert ids == [f"job-100-{n}" for n in range(4, 24)]
