"""The host's one Redis accessor against the tests' redis-server: one client per process,
a new one after a fork or a URL change, and an async client for subscribers."""

from __future__ import annotations

import asyncio
import os

import pytest
import redis

from common import redis_client


def test_one_client_per_process_and_url(redis_db, redis_url, settings, tmp_path):
    assert redis_client.client() is redis_db is redis_client.client()
    redis_db.set("k", "v")
    settings.REDIS_URL = f"unix://{tmp_path}/nothing.sock"
    elsewhere = redis_client.client()
    assert elsewhere is not redis_db
    with pytest.raises((redis.ConnectionError, OSError)):
        redis_client.ping()
    settings.REDIS_URL = redis_url
    assert redis_client.client().get("k") == b"v"


def test_a_forked_child_gets_its_own_connection(redis_db):
    """A Celery prefork child must not talk over its parent's socket."""
    redis_db.ping()  # the parent holds a live connection now
    parent_ids = {id(c) for c in redis_db.connection_pool._available_connections}
    assert parent_ids
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running pytest's teardown
        try:
            mine = redis_client.client()
            mine.set("child", str(os.getpid()))
            ok = mine is not redis_db and not (
                {id(c) for c in mine.connection_pool._available_connections} & parent_ids
            )
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"1"
    assert redis_db.get("child") == str(pid).encode()
    assert redis_client.client() is redis_db  # the parent's client is untouched


def test_async_client_receives_what_the_sync_client_publishes(redis_db):
    async def run() -> dict:
        client = redis_client.async_client()
        pubsub = client.pubsub()
        try:
            await pubsub.subscribe("chan")
            assert (await pubsub.get_message(timeout=2))["type"] == "subscribe"
            redis_db.publish("chan", "hello")
            msg = None
            while msg is None:
                msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=2)
            return msg
        finally:
            await pubsub.aclose()
            await client.aclose()

    assert asyncio.run(run())["data"] == b"hello"


def test_ping_of_another_url(redis_url, tmp_path):
    redis_client.ping(redis_url)
    with pytest.raises((redis.ConnectionError, OSError)):
        redis_client.ping(f"unix://{tmp_path}/nothing.sock")
