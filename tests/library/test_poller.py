"""The supervisor's `library-poll` job: one rescan of every store when the host starts, then
a store whose files moved is rescanned, once."""

from __future__ import annotations

import pytest

from library.models import InstalledTitle
from library.poller import StorePoller
from tests.library import stores


def _stores_in_cache() -> set[str]:
    return {i.split(":", 1)[0] for i in InstalledTitle.objects.values_list("id", flat=True)}


@pytest.mark.django_db
def test_the_first_run_rescans_every_store_once(state, fixture_stores, eager_celery, events):
    poller = StorePoller()
    with events.during():
        poller()  # the host's start rescan (eagerly here, on a worker in the host)
    assert _stores_in_cache() == {"steam", "heroic", "lutris"}
    InstalledTitle.objects.all().delete()
    with events.during():
        poller()  # the start rescan is not repeated, and nothing moved
    assert not InstalledTitle.objects.exists()


@pytest.mark.django_db
def test_the_start_rescan_is_retried_while_no_broker_answers(
    state, fixture_stores, eager_celery, events, monkeypatch
):
    from library import tasks

    broker_up = False

    def delay():
        if not broker_up:
            raise ConnectionError("no broker")
        return tasks.rescan_all.apply()

    monkeypatch.setattr(tasks.rescan_all, "delay", delay)
    poller = StorePoller()
    with events.during():
        poller()
    assert not InstalledTitle.objects.exists() and not poller.start_rescan_queued
    broker_up = True
    with events.during():
        poller()
    assert _stores_in_cache() == {"steam", "heroic", "lutris"}


@pytest.mark.django_db
def test_a_store_whose_files_moved_is_rescanned(state, fixture_stores, eager_celery, events):
    poller = StorePoller()
    with events.during():
        poller()  # the start rescan; the signatures recorded
    InstalledTitle.objects.all().delete()
    stores.write_manifest(fixture_stores.steam, 620, "Portal 2")
    with events.during():
        poller()  # steam moved: its rescan runs
    ids = set(InstalledTitle.objects.values_list("id", flat=True))
    assert "steam:620" in ids
    assert _stores_in_cache() == {"steam"}  # only the store that moved
    InstalledTitle.objects.all().delete()
    with events.during():
        poller()  # nothing moved since: nothing rescanned (a rescan would refill the cache)
    assert not InstalledTitle.objects.exists()
