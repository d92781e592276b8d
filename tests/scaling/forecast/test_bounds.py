"""The effective maximum of the cores names its source (scaling.forecast.bounds)."""

from scaling.forecast.bounds import BoundSource, capacity_source, cores_bound


def test_a_two_core_host_below_a_policy_of_eight_is_the_bound_and_is_named():
    bound = cores_bound(policy_min=1, policy_max=8, capacity=2, capacity_from=capacity_source("local[2]"))
    assert (bound.cores, bound.source, bound.below_policy) == (2, BoundSource.HOST, True)
    assert bound.text == "2 cores (the host's cores; the policy allows 8)"


def test_the_policy_is_the_bound_when_everything_else_allows_more():
    bound = cores_bound(policy_min=1, policy_max=4, knob_max=16, capacity=12,
                        capacity_from=capacity_source("spark://m:7077"))
    assert (bound.cores, bound.sources, bound.below_policy) == (4, (BoundSource.POLICY,), False)


def test_every_source_at_the_least_value_is_named_the_cluster_first():
    bound = cores_bound(policy_min=1, policy_max=6, knob_max=6, capacity=6, capacity_from=BoundSource.QUOTA)
    assert bound.sources == (BoundSource.QUOTA, BoundSource.KNOB, BoundSource.POLICY)
    assert bound.to_dict()["source"] == "quota"


def test_capacity_sources_follow_the_master():
    assert [capacity_source(m) for m in ("local", "local[*]", "spark://h:7077", "yarn", "k8s://x", "")] == [
        BoundSource.HOST, BoundSource.HOST, BoundSource.CLUSTER, BoundSource.QUOTA, BoundSource.QUOTA,
        BoundSource.CLUSTER]


def test_an_unknown_capacity_leaves_the_knob_and_policy():
    bound = cores_bound(policy_min=1, policy_max=8, knob_max=3)
    assert (bound.cores, bound.source) == (3, BoundSource.KNOB)
