"""Stage names: one short name per stage (graph, proposal, charts, API), the whole chain in the hover."""

from webapp.dashboard.figures import dag_figure, utilization_colour
from webapp.dashboard.stages import stage_name, stage_names


def test_stage_names_are_the_most_defining_operator():
    assert stage_name("MicroBatchScan → Filter → Project → Project") == "MicroBatchScan"
    assert stage_name("MapInPandas → Project → EventTimeWatermark → Filter → Project → HashAggregate") == \
        "MapInPandas"
    assert stage_name("HashAggregate → StateStoreRestore → HashAggregate → StateStoreSave → HashAggregate → "
                      "Scan ExistingRDD") == "StateStoreSave"
    assert stage_name("stage 2") == "stage 2"
    assert stage_name("Filter → Project → Filter") == "Filter"
    assert stage_name("", "v3") == "v3"


def test_a_name_two_stages_share_gets_their_vertex_id():
    names = stage_names([("v1", "HashAggregate → Exchange"), ("v2", "HashAggregate → Project"),
                         ("v3", "MapInPandas")])
    assert names == {"v1": "HashAggregate (v1)", "v2": "HashAggregate (v2)", "v3": "MapInPandas"}


def test_each_node_carries_name_parallelism_utilization_and_true_rate_and_edges_join_boxes():
    vertices = [
        {"id": "v0", "stage": "MicroBatchScan", "name": "MicroBatchScan → Project", "position": 0, "upstream": [],
         "tasks": 1, "proposed": 2, "utilization": 0.1, "true_processing_rate": 4500.0, "records_in_per_s": 900},
        {"id": "v1", "stage": "MapInPandas", "name": "MapInPandas", "position": 1, "upstream": ["v0"], "tasks": 1,
         "proposed": None, "utilization": 0.95, "true_processing_rate": 480.0, "records_in_per_s": 900,
         "bottleneck": True},
    ]
    figure = dag_figure(vertices)
    nodes = [a for a in figure["layout"]["annotations"] if a["name"].startswith("node:")]
    assert [n["text"].split("<br>")[:4] for n in nodes] == [
        ["<b>MicroBatchScan</b>", "p 1 → 2", "utilization 10%", "true rate 4,500 rec/s"],
        ["<b>MapInPandas</b>", "p 1", "utilization 95%", "true rate 480 rec/s"]]
    assert "bottleneck" in nodes[1]["text"] and "bottleneck" not in nodes[0]["text"]
    assert nodes[0]["bgcolor"] == utilization_colour(0.1) != nodes[1]["bgcolor"] == utilization_colour(0.95)
    edge = next(a for a in figure["layout"]["annotations"] if a["name"] == "edge")
    # from the source box to the sink box, stopping at the box edges (not through the nodes)
    assert (edge["ax"], edge["ay"], edge["x"], edge["y"]) == (0, 0, 0, -1)
    assert edge["standoff"] > 0 and edge["startstandoff"] > 0
