"""UTF-8 text messages (input kind 0x17) typed into a real Xvfb, read back as an X client would."""

from __future__ import annotations

import struct
import time

import pytest

from media.input import packets
from media.input.injector import MAX_TEXT_CHARS
from media.input.keymap import char_keysym
from media.input.limiter import RateLimiter
from media.input.session import SessionInput
from media.input.xtest import XInput


def text_packet(data: bytes) -> bytes:
    """What MCC's LiSendUtf8TextEvent puts on the control stream: BE size, LE magic, bytes."""
    return struct.pack(">I", 4 + len(data)) + struct.pack("<I", packets.TEXT) + data


def send_like_moonlight(inp: SessionInput, text: str) -> list[bool]:
    """MCC splits text into one message per code point."""
    return [inp.handle(text_packet(ch.encode())) for ch in text]


@pytest.fixture
def inp(xvfb):
    s = SessionInput(xvfb, gamepads=False)
    s.x.restore_after_s = 5.0  # the watcher reads each burst long before the keymap is undone
    yield s
    s.close()


def test_ascii_text_arrives_as_typed_with_shift_where_needed(inp, watcher):
    text = 'Hello, World! 1+1=2 ~_|"?\n\tok'
    assert all(send_like_moonlight(inp, text))
    assert watcher.typed(want=len(text)) == text
    assert inp.stats.text_chars == len(text) and inp.stats.refused == 0
    assert watcher.keys_down() == []  # no Shift left behind


def test_characters_without_a_key_get_a_spare_keycode_then_the_keymap_is_restored(xvfb, watcher):
    before = watcher.keymap()
    inp = SessionInput(xvfb, gamepads=False)
    inp.x.restore_after_s = 0.5
    try:
        text = "é€日本語ßΩ"
        for ch in text:  # one message per code point, read back as an app would, promptly
            assert inp.handle(text_packet(ch.encode()))
            assert watcher.typed(want=1) == ch
        # A message with several characters (other clients send up to 32 bytes) works too.
        assert inp.handle(text_packet("aé日Z".encode()))
        assert watcher.typed(want=4) == "aé日Z"
        assert watcher.keymap() != before  # the spare keycodes are bound...
        deadline = time.monotonic() + 5
        while watcher.keymap() != before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watcher.keymap() == before  # ...and given back after the text stops
        assert inp.handle(text_packet("ü".encode()))  # binding again after a restore works
        assert watcher.typed(want=1) == "ü"
    finally:
        inp.disconnect()  # restores at once, no timer needed
        assert watcher.keymap() == before
        inp.close()
    assert watcher.keys_down() == []


def test_more_distinct_characters_than_spare_keycodes_reuse_the_oldest(inp, watcher):
    before = watcher.keymap()
    spare = sum(1 for row in before if not any(row))
    text = "".join(chr(0x4E00 + i) for i in range(spare + 12))  # CJK, none on the keymap
    for ch in text:
        assert inp.handle(text_packet(ch.encode()))
        assert watcher.typed(want=1) == ch
    assert inp.x.restore_keymap() == spare
    assert watcher.keymap() == before


def test_bad_text_is_refused_cleanly(inp, watcher):
    for bad in (b"\xff\xfe", b"\xc3", b"a\xe2\x82", b"\xed\xa0\x80", b"", b"x" * 33):
        assert not inp.handle(text_packet(bad))  # invalid UTF-8, empty, over 32 bytes
    assert inp.stats.malformed == 6 and inp.stats.text_chars == 0
    assert not inp.handle(text_packet(b"\x1b"))  # a control character has no keysym
    assert not inp.handle(text_packet(b"a\x00b"))  # partly typed: counted as refused
    assert inp.stats.refused == 2
    assert watcher.typed(timeout=0.5) == "ab"
    assert char_keysym("\x7f") is None and char_keysym("\ud800") is None
    assert char_keysym("A") == 0x41 and char_keysym("€") == 0x010020AC


def test_text_goes_through_the_rate_limit_and_the_length_cap(xvfb, watcher):
    x = XInput(xvfb, RateLimiter(rate=1, burst=10))
    try:
        assert x.type_text("abcdefghijklmnop") == 10  # the burst, then dropped
        assert x.limiter.dropped == 1  # the rest of the message goes in one refusal
        assert watcher.typed(want=10) == "abcdefghij"
        x.limiter = RateLimiter()
        assert x.type_text("z" * (MAX_TEXT_CHARS + 8)) == MAX_TEXT_CHARS
        assert watcher.typed(want=MAX_TEXT_CHARS) == "z" * MAX_TEXT_CHARS
        assert x.type_text(None) == 0 and x.rejected == 2
    finally:
        x.close()
    assert watcher.keys_down() == []


def test_a_shift_the_client_holds_does_not_change_lower_level_text(inp, watcher):
    assert inp.handle(
        struct.pack(">I", 10) + struct.pack("<IBhBh", packets.KEY_DOWN, 0, 0xA0, 0, 0)
    )
    watcher.typed(timeout=0.3)  # Shift_L itself types nothing
    assert all(send_like_moonlight(inp, "aB1!é"))
    assert watcher.typed(want=5) == "aB1!é"
    assert len(watcher.keys_down()) == 1  # the client's Shift is still down
    inp.disconnect()
    assert watcher.keys_down() == []
