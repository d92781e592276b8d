"""DAG labels: the defining operators on the node, the whole operator chain in the hover."""

from webapp.dashboard.figures import short_label


def test_short_labels_keep_the_defining_operators_in_plan_order():
    assert short_label("MicroBatchScan → Filter → Project → Project") == "MicroBatchScan …"
    assert short_label("MapInPandas → Project → EventTimeWatermark → Filter → Project → HashAggregate") == \
        "MapInPandas → HashAggregate …"
    assert short_label("HashAggregate → StateStoreRestore → HashAggregate → StateStoreSave → HashAggregate → "
                       "Scan ExistingRDD") == "HashAggregate → StateStoreSave …"


def test_short_names_and_fallback_names_are_kept_whole():
    assert short_label("MicroBatchScan → Project") == "MicroBatchScan → Project"
    assert short_label("stage 2") == "stage 2"
    assert short_label("Filter → Project → Filter") == "Filter …"
