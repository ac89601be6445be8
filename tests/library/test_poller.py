"""The supervisor's `library-poll` job: a store whose files moved is rescanned, once."""

from __future__ import annotations

import pytest

from library.models import InstalledTitle
from library.poller import StorePoller
from tests.library import stores


@pytest.mark.django_db
def test_a_store_whose_files_moved_is_rescanned(state, fixture_stores, eager_celery, events):
    poller = StorePoller()
    with events.during():
        poller()  # the first run only records the signatures
    assert not InstalledTitle.objects.exists()
    stores.write_manifest(fixture_stores.steam, 620, "Portal 2")
    with events.during():
        poller()  # steam moved: its rescan runs (eagerly here, on a worker in the host)
    ids = set(InstalledTitle.objects.values_list("id", flat=True))
    assert "steam:620" in ids
    assert {i.split(":", 1)[0] for i in ids} == {"steam"}  # only the store that moved
    InstalledTitle.objects.all().delete()
    with events.during():
        poller()  # nothing moved since: nothing rescanned (a rescan would refill the cache)
    assert not InstalledTitle.objects.exists()
