"""The fleet's event stream between real hosts: a member host and a fleet host (each the real
`runhost`: daphne over TLS, Redis, Celery, the supervisor whose `fleet-relays` job runs the
relays), plus a stand-in member that sends garbage. Events emitted on the member reach
`GET /api/v1/fleet/events` on the fleet host tagged with the member, in the member's seq order;
a restart of the fleet host (resumed with the `Last-Event-ID` vector) loses nothing and repeats
nothing; the garbage member is cut without touching them; the
plugin token is refused."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys

import pytest

from fleet import pinned
from tests.fleet.fleet_stream import Reader
from tests.support.fakemember import FakeMember
from tests.support.livehost import ROOT, start_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

JOIN = """
import sys
import django
django.setup()
from fleet import member_tokens
from fleet.models import Member
url, fingerprint, name, token = sys.argv[1:5]
row = Member.objects.create(url=url, fingerprint=fingerprint, name=name)
member_tokens.put(row.id, token)
print(row.id)
"""


def manage_env(host) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    env.pop("REDIS_URL", None)
    env.update(HOST_STATE_DIR=str(host.state_dir), DJANGO_SETTINGS_MODULE="hostmgmt.settings")
    return env


def join(fleet, url: str, fingerprint: str, name: str, token: str) -> int:
    """A member row and its token written into the fleet host's state, as joining would."""
    out = subprocess.run(
        [sys.executable, "-c", JOIN, url, fingerprint, name, token],
        cwd=ROOT, env=manage_env(fleet), capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return int(out.stdout.strip().splitlines()[-1])


def emit(member, first: int, count: int) -> None:
    """`count` events on the member's own bus, numbered from `first` (payload `n`)."""
    for n in range(first, first + count):
        subprocess.run(
            [sys.executable, "manage.py", "emit_event", "game.running", json.dumps({"n": n})],
            cwd=ROOT, env=manage_env(member), check=True, timeout=60, capture_output=True,
        )  # fmt: skip


def fingerprint_of(host) -> str:
    der = ssl.PEM_cert_to_DER_cert(host.cert_path.read_text())
    return pinned.certificate_fingerprint(der)


def test_fleet_stream_across_a_fleet_host_restart(tmp_path):
    """A member's events tagged and in order beside a garbage-sending stand-in; the fleet host
    restarts while the member emits and the stream resumes from its id, nothing lost or
    repeated. (A member's restart: tests/fleet/test_fleet_netns_e2e.py.)"""
    member = start_host(state_dir=tmp_path / "member", wait=False)
    fleet = start_host(state_dir=tmp_path / "fleet", wait=False)
    garbage = FakeMember("garbage", n=13)
    readers: list[Reader] = []
    try:
        member.wait_ready()
        fleet.wait_ready()
        member_id = join(fleet, member.url, fingerprint_of(member), "den", member.plugin_token)
        bad_id = join(fleet, garbage.url, garbage.fingerprint, "junk", garbage.token)
        with fleet.client(headers={"Authorization": f"Bearer {fleet.plugin_token}"}) as c:
            assert c.get("/api/v1/fleet/events").status_code == 403

        reader = Reader(fleet)
        readers.append(reader)
        emit(member, 1, 3)
        reader.wait(lambda: reader.numbered(member_id) == [1, 2, 3])
        tags = {json.dumps(e["host"], sort_keys=True) for e in reader.events(member_id)}
        assert tags == {json.dumps({"id": member_id, "name": "den", "url": member.url},
                                   sort_keys=True)}  # fmt: skip
        seqs = [e["seq"] for e in reader.events(member_id) if e["_event"] != "dropped"]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        assert garbage.requests >= 1 and not reader.events(bad_id)

        last_id = [f["id"] for f in reader.frames if "id" in f][-1]
        reader.close()

        # The fleet host restarts while the member emits; the stream resumes from its id.
        fleet.stop()
        emit(member, 4, 2)
        fleet = start_host(state_dir=fleet.state_dir, base_port=fleet.base_port)
        resumed = Reader(fleet, last_id)
        readers.append(resumed)
        resumed.wait(lambda: resumed.numbered(member_id) == [4, 5])
        emit(member, 6, 1)
        resumed.wait(lambda: resumed.numbered(member_id) == [4, 5, 6])
        assert all(e["_event"] != "dropped" for e in resumed.events(member_id))
        seqs = [e["seq"] for e in resumed.events(member_id)]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        assert min(seqs) > int(dict(p.split(":") for p in last_id.split(","))[str(member_id)])
    finally:
        for reader in readers:
            reader.close()
        garbage.close()
        for host in (member, fleet):
            if host.stop() != 0:
                print(host.log_tail())
