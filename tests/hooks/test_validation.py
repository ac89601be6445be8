"""Hook documents with every kind of mistake, and every spelling of a forbidden URL."""

from __future__ import annotations

import pytest

from hooks import hook_config, ssrf


def _errors(doc) -> dict:
    with pytest.raises(hook_config.InvalidHooks) as info:
        hook_config.validate(doc)
    return info.value.fields


def test_valid_document_passes():
    doc = {
        "hooks": [
            {"on": "stream.*", "run": "echo hi", "timeout_s": 600, "debounce_ms": 0},
            {
                "on": "pairing.pending",
                "webhook": "https://192.168.1.20:8443/x",
                "filter": {"plane": "compat", "client": "deck"},
                "hmac_secret_file": "/etc/secret",
            },
            {"on": "client.connected", "webhook": "http://[fd00::5]/h", "timeout_s": 1},
            {"on": "host.started", "webhook": "https://hooks.example.com/x"},
        ]
    }
    assert hook_config.validate(doc) == doc["hooks"]


@pytest.mark.parametrize(
    "entry, field",
    [
        ({"on": "", "run": "x"}, "hooks[0].on"),
        ({"on": "   ", "run": "x"}, "hooks[0].on"),
        ({"run": "x"}, "hooks[0].on"),
        ({"on": "nope.kind", "run": "x"}, "hooks[0].on"),
        ({"on": "stream.*"}, "hooks[0]"),
        ({"on": "stream.*", "run": "x", "timeout_s": 0}, "hooks[0].timeout_s"),
        ({"on": "stream.*", "run": "x", "timeout_s": 601}, "hooks[0].timeout_s"),
        ({"on": "stream.*", "run": "x", "timeout_s": "30"}, "hooks[0].timeout_s"),
        ({"on": "stream.*", "run": "x", "timeout_s": True}, "hooks[0].timeout_s"),
        ({"on": "stream.*", "run": "x", "debounce_ms": -1}, "hooks[0].debounce_ms"),
        ({"on": "stream.*", "run": 5}, "hooks[0].run"),
        ({"on": 5, "run": "x"}, "hooks[0].on"),
        ({"on": "stream.*", "run": "x", "extra": 1}, "hooks[0].extra"),
        ({"on": "stream.*", "run": "x", "filter": []}, "hooks[0].filter"),
        ({"on": "stream.*", "run": "x", "filter": {"plane": "lan"}}, "hooks[0].filter.plane"),
        ({"on": "stream.*", "run": "x", "filter": {"user": "a"}}, "hooks[0].filter.user"),
        ({"on": "stream.*", "webhook": "ftp://example.com/"}, "hooks[0].webhook"),
        ({"on": "stream.*", "webhook": "file:///etc/passwd"}, "hooks[0].webhook"),
        ({"on": "stream.*", "webhook": "https://user:pw@example.com/"}, "hooks[0].webhook"),
        ({"on": "stream.*", "webhook": "not a url"}, "hooks[0].webhook"),
        ({"on": "stream.*", "run": "x", "hmac_secret_file": ""}, "hooks[0].hmac_secret_file"),
        ("not an object", "hooks[0]"),
    ],
)
def test_bad_entries_name_the_field(entry, field):
    assert field in _errors({"hooks": [entry]})


def test_bad_documents():
    assert "hooks" in _errors({})
    assert "hooks" in _errors({"hooks": {}})
    assert "extra" in _errors({"hooks": [], "extra": 1})
    assert "body" in _errors([])
    assert "hooks" in _errors({"hooks": [{"on": "host.*", "run": "x"}] * 300})
    with pytest.raises(hook_config.InvalidHooks):
        hook_config.parse_bytes(b"{" + b" " * (2 * 1024 * 1024) + b"}")
    with pytest.raises(hook_config.InvalidHooks):
        hook_config.parse_bytes(b"{not json")


FORBIDDEN = [
    "http://localhost/",
    "http://LOCALHOST:8080/",
    "http://localhost./",
    "http://api.localhost/",
    "http://127.0.0.1/",
    "http://127.1.2.3/",
    "http://127.1/",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://0x7f000001/",
    "http://0177.0.0.1/",
    "http://017700000001/",
    "http://0.0.0.0/",
    "http://0/",
    "http://169.254.169.254/latest/meta-data",
    "http://[::1]/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[::]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::ffff:169.254.1.1]/",
    "http://[::127.0.0.1]/",
    "http://[fe80::1]/",
    "http://[fe80::1%25eth0]/",
    "https://[FEBF::1]:443/",
]


@pytest.mark.parametrize("url", FORBIDDEN)
def test_forbidden_targets_are_refused(url):
    with pytest.raises(ssrf.UrlRefused):
        ssrf.check_url(url)
    assert "hooks[0].webhook" in _errors({"hooks": [{"on": "host.*", "webhook": url}]})


@pytest.mark.parametrize(
    "url", ["http://10.0.0.2/", "http://192.168.0.9:81/", "http://[fd12::1]/", "https://nas.lan/"]
)
def test_lan_ula_and_names_are_allowed(url):
    ssrf.check_url(url)


def test_name_resolving_to_loopback_is_refused_at_send_time():
    import socket

    name = socket.gethostname()
    try:
        addrs = {info[4][0] for info in socket.getaddrinfo(name, 80)}
    except socket.gaierror:
        addrs = set()
    if not any(a.startswith("127.") or a == "::1" for a in addrs):
        name = "localhost"  # still exercises the resolved-address rule below
    ssrf.url_host(f"http://{name}/")
    with pytest.raises(ssrf.UrlRefused):
        ssrf.resolve_checked(name, 80)


def test_save_and_hand_edited_invalid_file(bus, tmp_path, caplog):
    hook_config.save([{"on": "host.*", "run": "true"}])
    snap = hook_config.current()
    assert snap.valid and snap.entries[0]["run"] == "true"
    hook_config.hooks_path().write_text('{"hooks": [{"on": "", "run": "x"}]}')
    snap = hook_config.current()
    assert not snap.valid and snap.entries == ()
    assert any("every hook is disabled" in r.message for r in caplog.records)
