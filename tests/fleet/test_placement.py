"""The placement rule and the reading of a member's view: pure functions, no host."""

from __future__ import annotations

from fleet.member_view import Capacity, read
from fleet.placement import Candidate, choose, titles

GAME = ("steam:570", "Dota 2")


def member(mid, *, reachable=True, free=1, sessions=0, gpu=False, library=(GAME,), name=None):
    cap = Capacity(
        sessions=sessions,
        free_slots=free,
        gpu_encoder=gpu,
        titles=dict(library),
    )
    return Candidate(mid, name or f"m{mid}", f"https://10.0.0.{mid}:47990", reachable, cap)


def ids(choice):
    return [c.id for c in choice.ranked]


def test_gpu_encoder_first_then_most_free_then_fewest_sessions_then_id():
    members = [
        member(1, free=3),
        member(2, free=1, gpu=True),
        member(3, free=2, gpu=True),
        member(4, free=2, gpu=True, sessions=1),
        member(5, free=2, gpu=True),
    ]
    assert ids(choose(members, *GAME)) == [3, 5, 4, 2, 1]


def test_order_does_not_depend_on_input_order():
    members = [member(i, free=1) for i in (9, 4, 7)]
    assert ids(choose(members, *GAME)) == [4, 7, 9]
    assert ids(choose(list(reversed(members)), *GAME)) == [4, 7, 9]


def test_only_members_with_the_title_reachable_and_free():
    members = [
        member(1, library=[("steam:1", "Other")]),
        member(2, reachable=False, gpu=True),
        member(3, free=0, gpu=True),
        member(4, free=None, gpu=True),
        member(5),
    ]
    assert ids(choose(members, *GAME)) == [5]


def test_the_title_is_its_id_and_its_name():
    members = [
        member(1, library=[("custom:1", "Doom")]),
        member(2, library=[("custom:1", "Quake")]),
    ]
    assert ids(choose(members, "custom:1", "Quake")) == [2]
    assert choose(members, "custom:1", "Heretic").reason == "no member has Heretic"


def test_reasons_when_none_fits():
    assert choose([], *GAME).reason == "no member has Dota 2"
    assert choose([], *GAME).nobody_has and not choose([member(1, free=0)], *GAME).nobody_has
    down = [member(1, reachable=False), member(2, reachable=False)]
    assert choose(down, *GAME).reason == "every member with Dota 2 is unreachable"
    busy = [member(1, free=0), member(2, free=None)]
    assert choose(busy, *GAME).reason == "every member with Dota 2 is busy"
    mixed = [member(1, free=0), member(2, reachable=False)]
    assert choose(mixed, *GAME).reason == "every member with Dota 2 is busy or unreachable"
    assert choose(mixed, *GAME).ranked == []


def test_titles_aggregate_which_members_have_each():
    members = [
        member(1, name="den", library=[GAME, ("custom:1", "Doom")]),
        member(2, name="attic", library=[GAME, ("custom:1", "Quake")]),
    ]
    assert titles(members) == [
        {"id": "custom:1", "name": "Doom", "members": ["den"]},
        {"id": "steam:570", "name": "Dota 2", "members": ["attic", "den"]},
        {"id": "custom:1", "name": "Quake", "members": ["attic"]},
    ]


def test_read_takes_the_documented_keys():
    cap = read(
        {
            "version": "1.2.3",
            "sessions": 1,
            "max_sessions": 3,
            "gpus": [{"name": "RTX", "vendor": "nvidia", "encoder": True}],
            "library": [{"id": "steam:570", "name": "Dota 2"}, {"id": "custom:2", "title": "X"}],
        }
    )
    assert cap == Capacity("1.2.3", 1, 2, True, {"steam:570": "Dota 2", "custom:2": "X"})
    assert read({"sessions": [{}, {}], "free_slots": 4}).free_slots == 4
    assert read({"sessions": [{}, {}], "free_slots": 4}).sessions == 2
    assert read({"live_sessions": 1, "max_sessions": 2}) == Capacity(sessions=1, free_slots=1)
    assert read({"encoder": "nvenc"}).gpu_encoder is True
    assert read({"encoder": "software", "gpus": [{"encoder": "software"}]}).gpu_encoder is False
    assert read({"sessions": 5, "max_sessions": 2}).free_slots == 0


def test_read_is_defensive():
    assert read(None) == Capacity()
    assert read([]) == Capacity()
    cap = read(
        {
            "version": 7,
            "sessions": "many",
            "max_sessions": True,
            "gpus": "nvidia",
            "library": [None, 3, {"id": 5, "name": "x"}, {"id": "a", "name": ""}, {"id": "b"}],
        }
    )
    assert cap == Capacity("", 0, None, False, {})
    many = [{"id": f"i{n}", "name": "t"} for n in range(5000)]
    assert len(read({"library": many}).titles) == 1000
