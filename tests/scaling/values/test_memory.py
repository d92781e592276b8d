"""The memory values: one heap usage for a reading, a window and the collector's sample."""

import pytest

from scaling.values.memory import MB, MemoryReading, WindowMemory, heap_usage


@pytest.mark.parametrize(("peak", "maximum", "usage"), [
    (512, 1024, 0.5),
    (1100, 1024, 1100 / 1024),   # an overstated peak reads above 1
    (0, 1024, 0.0),
    (None, 1024, None),
    (512, None, None),
    (512, 0, None),              # no maximum: no share
])
def test_heap_usage_is_the_peak_over_the_maximum(peak, maximum, usage):
    assert heap_usage(peak, maximum) == usage


def test_a_reading_and_a_window_read_the_same_usage_in_their_units():
    reading = MemoryReading(gc_share=None, heap_peak_bytes=300 * MB, heap_max_bytes=1200 * MB)
    window = WindowMemory(gc_share=None, heap_peak_mb=300.0, heap_max_mb=1200.0, pressure=None,
                          recommendation=None, apply=False)
    assert reading.heap_usage == window.heap_usage == 0.25
