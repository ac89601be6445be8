"""Control-stream input payloads (type 0x0206) through SessionInput into a real Xvfb."""

from __future__ import annotations

import os
import random
import struct

from media.input import packets
from media.input.session import SessionInput


# Encoders as a client lays the bytes out (header: u32 BE size after itself, u32 LE magic).
def pkt(magic: int, body: bytes) -> bytes:
    return struct.pack(">I", 4 + len(body)) + struct.pack("<I", magic) + body


def key(code: int, down: bool) -> bytes:
    return pkt(3 if down else 4, struct.pack("<BHBh", 0, code, 0, 0))


def rel(dx: int, dy: int) -> bytes:
    return pkt(7, struct.pack(">hh", dx, dy))


def absolute(x: int, y: int, w: int, h: int) -> bytes:
    return pkt(5, struct.pack(">hhhhh", x, y, 0, w - 1, h - 1))


def button(b: int, down: bool) -> bytes:
    return pkt(8 if down else 9, struct.pack("<B", b))


def scroll(amount: int) -> bytes:
    return pkt(0x0A, struct.pack(">hhh", amount, amount, 0))


def hscroll(amount: int) -> bytes:
    return pkt(0x55000001, struct.pack(">h", amount))


def pad(index: int, buttons: int = 0x1000, mask: int = 1) -> bytes:
    body = struct.pack("<HhhHHBBhhhh", 0x1A, index, mask, 0x14, buttons, 0, 0, 0, 0, 0, 0)
    return pkt(0x0C, body + struct.pack("<hhh", 0x9C, 0, 0x55))


def test_parse_every_kind():
    assert packets.parse(key(0x8041, True)) == packets.Key(0x41, True)
    assert packets.parse(key(0x41, False)) == packets.Key(0x41, False)
    assert packets.parse(key(0x1241, True)).vk == -1
    assert packets.parse(rel(-5, 300)) == packets.MouseRel(-5, 300)
    assert packets.parse(absolute(10, 20, 1920, 1080)) == packets.MouseAbs(10, 20, 1920, 1080)
    assert packets.parse(button(3, False)) == packets.Button(3, False)
    assert packets.parse(scroll(-120)) == packets.Scroll(-120)
    assert packets.parse(hscroll(60)) == packets.Scroll(60, horizontal=True)
    p = packets.parse(pad(2, buttons=0x9001, mask=0b101))
    assert (p.index, p.buttons, p.active_mask) == (2, 0x9001, 0b101)
    assert packets.parse(pkt(0x17, "é!".encode())) == packets.Text("é!")
    assert packets.parse(pkt(0x12345, b"xx")) is None


def test_keys_mouse_and_scroll_reach_the_display(xvfb, watcher):
    s = SessionInput(xvfb)
    try:
        for payload in (key(0x8041, True), key(0x8041, False), key(0x0D, True), key(0x0D, False)):
            assert s.handle(payload)
        assert s.handle(absolute(1919, 1079, 1920, 1080))  # client's far corner
        assert s.x.pointer() == (1279, 719)
        assert s.handle(absolute(960, 540, 1920, 1080))
        assert s.handle(rel(-10, 5))
        assert s.x.pointer() == (630, 365)
        assert s.handle(button(1, True)) and s.handle(button(1, False))
        assert s.handle(scroll(-120)) and s.handle(hscroll(120))
        got = watcher.events(want=4 + 2 + 4)
        assert got == [
            ("key+", "a"),
            ("key-", "a"),
            ("key+", "Return"),
            ("key-", "Return"),
            ("btn+", 1),
            ("btn-", 1),
            ("btn+", 5),
            ("btn-", 5),
            ("btn+", 7),
            ("btn-", 7),
        ]
        assert s.stats.handled == 11
    finally:
        s.close()


def test_bad_packets_never_raise_and_never_leave_keys_held(xvfb, watcher):
    s = SessionInput(xvfb)
    try:
        assert s.handle(key(0xA0, True))  # shift held...
        assert s.handle(button(3, True))
        bad = [b"", b"\x00" * 7, pkt(3, b"\x00"), pkt(5, b"\x01\x02"), key(0x1241, True)]
        bad += [key(0, True), key(0xFF, True), button(42, True), pad(99), pad(3)]
        for payload in bad:
            assert not s.handle(payload)
        rng = random.Random(9)
        for _ in range(5000):  # fuzz: random magics and bodies
            magic = rng.choice([3, 4, 5, 7, 8, 9, 0x0A, 0x0C, 0x17, rng.randrange(2**32)])
            s.handle(pkt(magic, os.urandom(rng.randrange(0, 40))))
        assert s.stats.malformed >= 3
        s.disconnect()  # ...until the client vanishes
        assert watcher.keys_down() == [] and watcher.buttons_down() == 0
        if not s.gamepads_available:
            assert s.gamepad_reason
    finally:
        s.close()
