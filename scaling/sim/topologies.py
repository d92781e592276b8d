"""The simulated jobs: DS2's word count, DAGs shaped like Nexmark Q1, Q3, Q5, Q8 and Q11, the demo
pipeline, a two-branch DAG whose branches need very different parallelism (FLIP-271's case
against job-wide scaling), a hot key the collector does not see, and a bottleneck pinned by its state.

Rates are records per busy core-second; selectivities are output records per input record. The
shapes follow the Nexmark queries (sources, filters, joins, windows); the numbers are plausible,
not measured.
"""

from __future__ import annotations

from scaling.sim.model import CapacityCurve, SimJob, SimVertex
from scaling.values.topology import Edge


def _linear(rate: float) -> CapacityCurve:
    return CapacityCurve(rate)


def wordcount(*, generator: bool = False, source_rate: float = 50_000.0, flatmap_rate: float = 10_000.0,
              count_rate: float = 40_000.0, words_per_sentence: float = 8.0, parallelism: int = 1) -> SimJob:
    """DS2's word count (Kalavri et al., OSDI 2018, §5): Source → FlatMap (splits sentences into
    words) → Count (keyed by word). ``generator`` makes the source a throttled spout, as in Heron."""
    return SimJob("wordcount", (
        SimVertex("source", _linear(source_rate), 1.0, parallelism, source=True, partitions=None if generator else 64,
                  generator=generator, name="Source"),
        SimVertex("flatmap", _linear(flatmap_rate), words_per_sentence, parallelism, name="FlatMap"),
        SimVertex("count", _linear(count_rate), 0.01, parallelism, name="Count"),
    ), (Edge("source", "flatmap", "rebalance"), Edge("flatmap", "count", "hash")),
        "DS2's word count: Source -> FlatMap -> Count")


def nexmark_q1() -> SimJob:
    """Q1 currency conversion: bids → map → sink."""
    return SimJob("nexmark-q1", (
        SimVertex("bids", _linear(40_000.0), 1.0, source=True, partitions=32, name="Bids source"),
        SimVertex("convert", _linear(12_000.0), 1.0, name="Map: dollar -> euro"),
        SimVertex("sink", _linear(30_000.0), 1.0, name="Sink"),
    ), (Edge("bids", "convert", "forward"), Edge("convert", "sink", "forward")), "Q1: currency conversion")


def nexmark_q3() -> SimJob:
    """Q3 local item suggestion: persons (filtered by state) joined with auctions (by category)."""
    return SimJob("nexmark-q3", (
        SimVertex("persons", _linear(50_000.0), 0.1, source=True, source_share=0.2, partitions=16, name="Persons"),
        SimVertex("auctions", _linear(50_000.0), 0.2, source=True, source_share=0.8, partitions=32, name="Auctions"),
        SimVertex("join", CapacityCurve(6_000.0, "amdahl", serial_fraction=0.01), 0.5, name="Incremental join"),
        SimVertex("sink", _linear(30_000.0), 1.0, name="Sink"),
    ), (Edge("persons", "join", "hash"), Edge("auctions", "join", "hash"), Edge("join", "sink", "forward")),
        "Q3: persons x auctions incremental join")


def nexmark_q5() -> SimJob:
    """Q5 hot items: sliding-window bid count per auction, then the max per window."""
    return SimJob("nexmark-q5", (
        SimVertex("bids", _linear(40_000.0), 1.0, source=True, partitions=32, name="Bids source"),
        SimVertex("window_count", CapacityCurve(8_000.0, "amdahl", serial_fraction=0.005), 0.1,
                  name="Sliding window count"),
        SimVertex("max", _linear(20_000.0), 0.05, name="Max per window"),
        SimVertex("sink", _linear(30_000.0), 1.0, name="Sink"),
    ), (Edge("bids", "window_count", "hash"), Edge("window_count", "max", "hash"), Edge("max", "sink", "forward")),
        "Q5: hot items (sliding window count, max)")


def nexmark_q8() -> SimJob:
    """Q8 monitor new users: a tumbling-window join of persons and auctions."""
    return SimJob("nexmark-q8", (
        SimVertex("persons", _linear(40_000.0), 1.0, source=True, source_share=0.3, partitions=16, name="Persons"),
        SimVertex("auctions", _linear(40_000.0), 1.0, source=True, source_share=0.7, partitions=32, name="Auctions"),
        SimVertex("window_join", CapacityCurve(9_000.0, "task-overhead", task_overhead_s=0.01), 0.05,
                  name="Tumbling window join"),
        SimVertex("sink", _linear(30_000.0), 1.0, name="Sink"),
    ), (Edge("persons", "window_join", "hash"), Edge("auctions", "window_join", "hash"),
        Edge("window_join", "sink", "forward")), "Q8: window join of persons and auctions")


def nexmark_q11() -> SimJob:
    """Q11 user sessions: a session window per bidder (per-task overhead of the session state)."""
    return SimJob("nexmark-q11", (
        SimVertex("bids", _linear(40_000.0), 1.0, source=True, partitions=32, name="Bids source"),
        SimVertex("sessions", CapacityCurve(6_000.0, "task-overhead", task_overhead_s=0.02), 0.2,
                  name="Session window per bidder"),
        SimVertex("sink", _linear(30_000.0), 1.0, name="Sink"),
    ), (Edge("bids", "sessions", "hash"), Edge("sessions", "sink", "forward")), "Q11: user sessions")


def demo() -> SimJob:
    """The demo pipeline (sparkclient.pipelines): scan + parse + filter bids (8 partitions), an
    I/O-bound enrich (2 ms per record), and a stateful windowed count whose 2 state partitions are
    pinned by the checkpoint."""
    return SimJob("demo", (
        SimVertex("scan", _linear(20_000.0), 0.9, source=True, partitions=8, name="MicroBatchScan -> Filter"),
        SimVertex("enrich", _linear(500.0), 1.0, name="Enrich (I/O-bound lookup)"),
        SimVertex("count", _linear(60_000.0), 0.01, parallelism=2, adjustable=False,
                  name="Windowed count (state, pinned)"),
    ), (Edge("scan", "enrich", "rebalance"), Edge("enrich", "count", "hash")), "The demo pipeline")


def two_branch() -> SimJob:
    """One source feeding a heavy and a light branch: the heavy one needs about 20 times the light
    one's parallelism, so job-wide (uniform) scaling over-provisions one of them."""
    return SimJob("two-branch", (
        SimVertex("source", _linear(80_000.0), 1.0, source=True, partitions=64, name="Source"),
        SimVertex("heavy", _linear(2_500.0), 0.1, name="Heavy branch (model scoring)"),
        SimVertex("light", _linear(50_000.0), 1.0, name="Light branch (archive)"),
        SimVertex("heavy_sink", _linear(30_000.0), 1.0, name="Heavy sink"),
        SimVertex("light_sink", _linear(60_000.0), 1.0, name="Light sink"),
    ), (Edge("source", "heavy", "rebalance"), Edge("source", "light", "forward"),
        Edge("heavy", "heavy_sink", "forward"), Edge("light", "light_sink", "forward")),
        "Two branches needing very different parallelism")


def missed_skew() -> SimJob:
    """A keyed aggregation with a hot key: its slowest task is busy 3 times as long as the median,
    and the collector does not see it (no task summary; AQE coalesced the stage), so the mean busy
    time reads a third of what sets the batch's pace."""
    return SimJob("missed-skew", (
        SimVertex("scan", _linear(40_000.0), 1.0, source=True, partitions=32, name="Scan"),
        SimVertex("agg", _linear(3_000.0), 0.1, skew=3.0, skew_seen=False, straggler_probability=0.05,
                  straggler_factor=1.5, name="Aggregate by key (hot key, skew not seen)"),
        SimVertex("sink", _linear(30_000.0), 1.0, name="Sink"),
    ), (Edge("scan", "agg", "hash"), Edge("agg", "sink", "forward")), "A hot key the collector misses")


def pinned_state() -> SimJob:
    """A stateful stage pinned by its checkpoint to 2 state partitions carries a third of the work:
    at the base load it takes about a fifth of each trigger on its 2 tasks, whatever the cores, so
    cores beyond what the other stages need cannot shorten the batch."""
    return SimJob("pinned-state", (
        SimVertex("scan", _linear(40_000.0), 1.0, source=True, partitions=16, name="Scan"),
        SimVertex("parse", _linear(2_500.0), 1.0, name="Parse and enrich"),
        SimVertex("state", _linear(24_000.0), 0.05, parallelism=2, adjustable=False,
                  name="Stateful dedup (2 state partitions, pinned)"),
        SimVertex("sink", _linear(30_000.0), 1.0, name="Sink"),
    ), (Edge("scan", "parse", "rebalance"), Edge("parse", "state", "hash"), Edge("state", "sink", "forward")),
        "A bottleneck pinned by its state partitions")


CATALOG = {
    "wordcount": wordcount, "nexmark-q1": nexmark_q1, "nexmark-q3": nexmark_q3, "nexmark-q5": nexmark_q5,
    "nexmark-q8": nexmark_q8, "nexmark-q11": nexmark_q11, "demo": demo, "two-branch": two_branch,
    "missed-skew": missed_skew, "pinned-state": pinned_state,
}


def job(name: str) -> SimJob:
    """The job named ``name`` from the catalog. Raises KeyError naming the known ones."""
    try:
        return CATALOG[name]()
    except KeyError:
        raise KeyError(f"unknown topology {name!r}; known: {', '.join(CATALOG)}") from None
