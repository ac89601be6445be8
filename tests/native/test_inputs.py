"""The data-channel message mapping onto the injector, with a recording fake (XTest itself is
covered end to end in test_player)."""

from __future__ import annotations

from native.inputs import Pads, inject


class FakeX:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *a: self.calls.append((name, *a)) or True


def test_messages_map_to_injector_calls():
    x = FakeX()
    assert inject(x, {"t": "k", "vk": 65, "d": 1})
    assert inject(x, {"t": "m", "x": 5, "y": 6, "w": 1280, "h": 720})
    assert inject(x, {"t": "r", "dx": -3, "dy": 4})
    assert inject(x, {"t": "b", "b": 3, "d": 0})
    assert inject(x, {"t": "s", "a": -120, "h": 1})
    assert x.calls == [
        ("key", 65, True),
        ("move_absolute", 5, 6, 1280, 720),
        ("move_relative", -3, 4),
        ("button", 3, False),
        ("scroll", -120, True),
    ]


def test_bad_messages_are_refused():
    x = FakeX()
    for ev in [{"t": "k"}, {"t": "k", "vk": "a", "d": 1}, {"t": "zz"}, {}, {"t": "b", "b": None}]:
        assert inject(x, ev) is False
    assert x.calls == []


def test_pads_without_uinput_are_refused_once(monkeypatch):
    from media.input import gamepad

    monkeypatch.setattr(gamepad, "availability", lambda path=gamepad.UINPUT: (False, "no uinput"))
    pads = Pads()
    assert inject(None, {"t": "p", "i": 0, "b": 0x1000}, pads) is False
    assert pads.unavailable == "no uinput"
    assert inject(None, {"t": "p", "i": 99}, pads) is False
    pads.close()
