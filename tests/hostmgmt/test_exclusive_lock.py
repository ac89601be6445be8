"""The test run's reader-writer lock (tests/support/exclusive.py): two RunLocks on the same
files behave as two workers do (flock locks belong to each open file)."""

from __future__ import annotations

import threading
import time

from tests.support.exclusive import RunLock


def _taken_within(lock: RunLock, exclusive: bool, seconds: float) -> threading.Event:
    got = threading.Event()

    def take():
        lock.take(exclusive)
        got.set()

    threading.Thread(target=take, daemon=True).start()
    got.wait(seconds)
    return got


def test_an_exclusive_holder_keeps_readers_out_until_it_releases(tmp_path):
    writer, reader = RunLock(tmp_path), RunLock(tmp_path)
    writer.take(exclusive=True)
    got = _taken_within(reader, False, 0.5)
    assert not got.is_set()
    writer.release()
    assert got.wait(5) and reader.mode == "shared"
    reader.release()


def test_readers_share_and_a_writer_waits_for_all_of_them(tmp_path):
    a, b, writer = RunLock(tmp_path), RunLock(tmp_path), RunLock(tmp_path)
    a.take(exclusive=False)
    b.take(exclusive=False)
    got = _taken_within(writer, True, 0.5)
    assert not got.is_set()
    a.release()
    time.sleep(0.3)
    assert not got.is_set()  # b still runs a test
    b.release()
    assert got.wait(5) and writer.mode == "exclusive"
    writer.release()


def test_a_waiting_writer_goes_before_a_new_reader(tmp_path):
    running, writer, late = RunLock(tmp_path), RunLock(tmp_path), RunLock(tmp_path)
    running.take(exclusive=False)
    wrote = _taken_within(writer, True, 0.3)
    read = _taken_within(late, False, 0.3)  # arrives while the writer waits: held at the gate
    assert not wrote.is_set() and not read.is_set()
    running.release()
    assert wrote.wait(5)
    time.sleep(0.3)
    assert not read.is_set()
    writer.release()
    assert read.wait(5)
    late.release()


def test_taking_the_held_mode_again_is_a_no_op(tmp_path):
    lock, other = RunLock(tmp_path), RunLock(tmp_path)
    lock.take(exclusive=True)
    lock.take(exclusive=True)  # the worker's next test is exclusive too: kept, no wait
    got = _taken_within(other, False, 0.3)
    assert not got.is_set()
    lock.take(exclusive=False)  # an exclusive block ends: down to shared, beside other readers
    assert lock.mode == "shared" and got.wait(5)
    lock.release()
    other.release()
