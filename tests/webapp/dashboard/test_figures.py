"""Stage names: one short name per stage (graph, proposal, charts, API), the whole chain in the hover."""

import pytest

from tests.webapp.factories import make_job, make_snapshots
from webapp.dashboard.figures import dag_figure, utilization_colour
from webapp.dashboard.reads import dag_vertices
from webapp.jobs.models import MetricSnapshot
from webapp.jobs.stages import stage_name, stage_names
from webapp.loop.evaluate import evaluation_run


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


def test_a_skewed_stage_says_so_in_its_box_and_jitter_only_in_the_hover():
    base = {"position": 0, "upstream": [], "tasks": 4, "proposed": None, "utilization": 0.5,
            "true_processing_rate": 1000.0, "records_in_per_s": 500}
    vertices = [dict(base, id="v0", stage="Scan", name="Scan", task_skew=1.67),
                dict(base, id="v1", stage="Agg", name="Agg", position=1, upstream=["v0"], task_skew=1.04),
                dict(base, id="v2", stage="Sink", name="Sink", position=2, upstream=["v1"], task_skew=None),
                dict(base, id="v3", stage="Tiny", name="Tiny", position=3, upstream=["v2"], task_skew=1.3,
                     utilization=0.01)]
    nodes = {a["name"]: a for a in dag_figure(vertices)["layout"]["annotations"] if a["name"].startswith("node:")}
    assert "slowest task ×1.67 the mean" in nodes["node:v0"]["text"]
    assert "slowest task" not in nodes["node:v1"]["text"] and "×1.04" in nodes["node:v1"]["hovertext"]
    assert "busiest task not measured" in nodes["node:v2"]["hovertext"]
    # a stage busy 1 % of its slots: the jitter of its short tasks is only in the hover
    assert "slowest task" not in nodes["node:v3"]["text"] and "×1.30" in nodes["node:v3"]["hovertext"]


@pytest.mark.django_db
def test_the_dag_reads_the_busiest_task_of_the_stored_snapshots():
    """A stage's skew is Σ busiest-task busy time over Σ mean-task busy time of the run's snapshots."""
    job = make_job(metric_window_s=45)
    make_snapshots(job, count=4, tasks=(1, 4, 2), enrich_busy_max_s=7.5)  # enrich: 15 s on 4 tasks, busiest 7.5 s
    rows = {row["id"]: row for row in dag_vertices(job=job)}
    assert rows["v1"]["task_skew"] == 2.0
    assert rows["v0"]["task_skew"] is None                     # not measured
    # the true processing rate is at the busiest task's pace, as the plan's; the mean's is kept beside it
    assert rows["v1"]["true_processing_rate"] == pytest.approx(rows["v1"]["true_processing_rate_mean"] / 2)
    assert rows["v0"]["true_processing_rate_mean"] is None
    planned = {v.vertex_id: v.true_processing_rate for v in evaluation_run(job=job).job_plan.vertices}
    assert {vid: row["true_processing_rate"] for vid, row in rows.items()} == pytest.approx(planned)
    hover = next(a["hovertext"] for a in dag_figure(list(rows.values()))["layout"]["annotations"]
                 if a["name"] == "node:v1")
    assert "per busy second at the busiest task's pace (" in hover
    even = next(a["hovertext"] for a in dag_figure([dict(rows["v1"], true_processing_rate_mean=rows["v1"][
        "true_processing_rate"], upstream=[])])["layout"]["annotations"] if a["name"] == "node:v1")
    assert "busiest task's pace" not in even  # the same rate is not said twice


@pytest.mark.django_db
@pytest.mark.parametrize(("share", "shown"), [(0.49, False), (0.51, True)])
def test_the_dag_shows_the_batch_overhead_as_its_own_box_when_it_is_over_half_the_batch(client, operator, share,
                                                                                        shown):
    """The job page's data (its live twin's JSON): the batch overhead's share of the batch, and the DAG's box
    for it only above half of the batch, with that share; the stages' boxes stay as they are."""
    job = make_job(metric_window_s=45)
    make_snapshots(job, batch_duration_s=5.0)
    MetricSnapshot.objects.filter(job=job).update(batch_overhead_s=share * 5.0)
    evaluation_run(job=job)
    data = client.get(f"/jobs/{job.pk}/live/").json()
    assert data["overhead"] == {"share": share, "overhead_s": share * 5.0, "batch_s": 5.0, "shown": shown}
    annotations = data["dag"]["layout"]["annotations"]
    boxes = [a for a in annotations if a["name"] == "overhead"]
    assert len(boxes) == int(shown)
    assert len([a for a in annotations if a["name"].startswith("node:")]) == 3
    if shown:
        assert f"{share:.0%} of each batch" in boxes[0]["text"]
        assert boxes[0]["x"] + 0.5 < data["dag"]["layout"]["xaxis"]["range"][1]  # inside the drawn area
