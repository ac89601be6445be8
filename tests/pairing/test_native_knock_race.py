"""A browser's re-knock that checked "not paired" just before the operator's approve (or deny)
committed, and reaches the queue just after the decision released its claim, must not queue
the device again: the console showed an approved browser still waiting (seen once in a
parallel run on a loaded machine)."""

from __future__ import annotations

import pytest

from common.errors import Forbidden
from pairing import native
from pairing.native_pending import PendingQueue

pytestmark = pytest.mark.django_db

FP = "ab" * 32


@pytest.fixture
def decided_between(redis_db, monkeypatch):
    """Knock once (pending), then make the next knock's queueing run right after `decide`."""
    first = native.knock(FP, "console tv", "10.0.0.7")
    assert first.state == "pending"
    queue_knock = PendingQueue.knock

    def arrange(decide):
        done = []

        def late_knock(self, *args, **kwargs):
            if not done:  # the decision lands between the knock's checks and its queueing
                done.append(decide(first.pending_id))
            return queue_knock(self, *args, **kwargs)

        monkeypatch.setattr(PendingQueue, "knock", late_knock)

    return arrange


def test_an_approve_between_the_check_and_the_queue_pairs_the_knock(decided_between):
    decided_between(native.approve)
    result = native.knock(FP, "console tv", "10.0.0.7")
    assert result.state == "paired" and result.client.fingerprint == FP
    assert native.pending() == []


def test_a_deny_between_the_check_and_the_queue_refuses_the_knock(decided_between):
    decided_between(native.deny)
    with pytest.raises(Forbidden, match="denied"):
        native.knock(FP, "console tv", "10.0.0.7")
    assert native.pending() == []
