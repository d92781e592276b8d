"""Invariants of the FLIP-271 / DS2 model (hypothesis)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaling.planner.continuous import plan_job
from scaling.planner.vertex_scaler import parallelism_bounds
from scaling.policy.policy import Policy
from scaling.values.metrics import VertexMetrics
from scaling.values.state import ScalerState
from scaling.values.topology import Edge, Topology, Vertex

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def jobs(draw, *, alignment=st.sampled_from(("balanced", "evenly_spread", "off"))):
    """A random DAG with DS2-style exact rates: every vertex gives its aggregated true processing
    rate (per-instance rate × parallelism) and true output rate (× selectivity); sources give input."""
    n = draw(st.integers(1, 6))
    policy = Policy(
        utilization_target=draw(st.sampled_from((0.5, 0.6, 0.7, 0.8, 1.0))),
        vertex_min_parallelism=draw(st.integers(1, 3)), vertex_max_parallelism=draw(st.integers(3, 300)),
        scale_down_max_factor=1.0, scale_up_max_factor=100000.0, restart_time_s=draw(st.sampled_from((0, 60, 300))),
        scale_down_interval_s=0, alignment=draw(alignment))
    vertices, edges, per_instance, selectivity_of = [], [], {}, {}
    for i in range(n):
        vid = f"v{i}"
        inputs = sorted(draw(st.sets(st.integers(0, i - 1), max_size=2))) if i else []
        source = not inputs
        lower, upper = policy.vertex_min_parallelism, policy.vertex_max_parallelism
        partitions = draw(st.sampled_from((None, 8, 12, 64, 720))) if source else None
        max_parallelism = draw(st.sampled_from((128, 720, 32768)))
        cap = min(upper, max_parallelism, partitions or upper)
        vertices.append(Vertex(vid, parallelism=draw(st.integers(min(lower, cap), cap)),
                               max_parallelism=max_parallelism, partitions=partitions, source=source))
        edges.extend(Edge(f"v{j}", vid, draw(st.sampled_from(("hash", "forward", "rebalance")))) for j in inputs)
        per_instance[vid] = draw(st.integers(1, 5000))
        selectivity_of[vid] = draw(st.sampled_from((0.1, 0.5, 1.0, 2.0, 20.0)))
    return Topology(tuple(vertices), tuple(edges)), per_instance, selectivity_of, policy


def metrics_for(topology, per_instance, selectivity_of, rate, backlog=0.0):
    """Exact rates with linear scaling: the vertex TPR is per-instance rate × parallelism."""
    result = {}
    for v in topology.vertices:
        tpr = float(per_instance[v.id] * v.parallelism)
        result[v.id] = VertexMetrics(
            records_in_per_s=float(rate) if topology.is_source(v.id) else None,
            records_out_per_s=float(rate) * selectivity_of[v.id] if topology.is_source(v.id) else None,
            backlog=backlog if topology.is_source(v.id) else 0.0,
            true_processing_rate=tpr, true_output_rate=tpr * selectivity_of[v.id])
    return result


@SETTINGS
@given(job=jobs(), rate=st.integers(0, 1_000_000), backlog=st.sampled_from((0.0, 1e5, 1e7)))
def test_proposed_parallelism_stays_within_bounds(job, rate, backlog):
    topology, per_instance, selectivity_of, policy = job
    plan = plan_job(topology, metrics_for(topology, per_instance, selectivity_of, rate, backlog), policy)
    for vp in plan.vertices:
        # Continuous mode: Flink main's JobVertexScaler.scale bounds a source by its max parallelism
        # and the upper limit, not its partitions (those only bound the alignment's search).
        lower, upper = parallelism_bounds(topology.vertex(vp.vertex_id), policy, cap_at_partitions=False)
        assert lower <= vp.proposed <= upper
        assert lower <= vp.recommended <= upper


@SETTINGS
@given(job=jobs(), rates=st.tuples(st.integers(0, 1_000_000), st.integers(0, 1_000_000)))
def test_higher_input_rate_never_yields_lower_parallelism(job, rates):
    """The model's computed parallelism (``recommended``) is monotone in the input rate, for every
    vertex of the DAG. (The job-level gate can keep a vertex at its current value, so ``proposed`` is
    only monotone per vertex for a one-vertex job; checked below.)"""
    topology, per_instance, selectivity_of, policy = job
    low, high = sorted(rates)
    plan_low = plan_job(topology, metrics_for(topology, per_instance, selectivity_of, low), policy)
    plan_high = plan_job(topology, metrics_for(topology, per_instance, selectivity_of, high), policy)
    for a, b in zip(plan_low.vertices, plan_high.vertices, strict=True):
        assert a.recommended <= b.recommended
    if len(topology.vertices) == 1:
        assert plan_low.vertices[0].proposed <= plan_high.vertices[0].proposed


@SETTINGS
@given(job=jobs(), rate=st.integers(1, 1_000_000), backlog=st.sampled_from((0.0, 1e5)))
def test_one_step_convergence(job, rate, backlog):
    """DS2's one-step convergence: apply the proposal, re-evaluate with the true rates scaled linearly
    to the new parallelism (same input), and nothing changes any more."""
    topology, per_instance, selectivity_of, policy = job
    first = plan_job(topology, metrics_for(topology, per_instance, selectivity_of, rate, backlog), policy,
                     ScalerState(), 0.0)
    applied = topology.with_parallelism({vp.vertex_id: vp.proposed for vp in first.vertices})
    second = plan_job(applied, metrics_for(applied, per_instance, selectivity_of, rate, backlog), policy,
                      first.next_state, 60.0)
    assert second.decision != "scale", second.reasons
    assert all(vp.proposed == vp.current for vp in second.vertices)
    if first.decision == "scale" and not second.backlog_mode:  # backlog mode suppresses scale-downs
        assert all(vp.recommended == vp.current for vp in second.vertices)
