"""Per-frame figures in bounded memory: what the stream's readers get back."""

from common.samples import Samples


def test_count_sum_last_and_window():
    s = Samples(keep=4)
    assert len(s) == 0 and not s and s.last is None and s.since(0) == []
    for v in range(10):
        s.append(float(v))
    assert (s.count, s.total, s.last) == (10, 45.0, 9.0)
    assert s.values() == [6.0, 7.0, 8.0, 9.0]  # only the last `keep` held
    assert s.since(8) == [8.0, 9.0] and s.since(0) == [6.0, 7.0, 8.0, 9.0] and s.since(10) == []
    assert s.at(9) == 9.0 and s.at(6) == 6.0 and s.at(5) is None and s.at(10) is None
    assert s.tally() == (10, 45.0)
    assert s.first == 6


def test_memory_stays_bounded_over_an_hour_of_frames():
    s = Samples()
    for _ in range(60 * 3600):
        s.append(1.5)
    assert s.count == 216_000 and s.total == 324_000.0
    assert len(s.values()) == 4096
