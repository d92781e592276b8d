"""A frozen prediction's stage rates (``prediction.inputs.vertices``, the proposal's and each earlier
revision's) stored ``"inf"`` for an infinite rate; the API shows the prediction as stored, and its
numbers are numbers or null, so an infinite rate is now stored as null
(``webapp.proposals.predictions``), and the rows stored before are rewritten so."""

from django.db import migrations

#: The rates of a prediction's stage that were stored as ``"inf"`` when infinite.
RATES = ("true_processing_rate", "target_data_rate", "catch_up_data_rate")
#: Proposals read and written per batch.
BATCH = 500


def prediction_null_infinity(prediction):
    """``prediction`` with each of its stages' :data:`RATES` spelled ``"inf"``/``"-inf"`` as None; the same
    object when there is none."""
    vertices = ((prediction if isinstance(prediction, dict) else {}).get("inputs") or {}).get("vertices")
    if not isinstance(vertices, list) or not any(
            isinstance(v, dict) and v.get(rate) in ("inf", "-inf") for v in vertices for rate in RATES):
        return prediction
    rows = [{**v, **{rate: None for rate in RATES if v.get(rate) in ("inf", "-inf")}} if isinstance(v, dict)
            else v for v in vertices]
    return {**prediction, "inputs": {**prediction["inputs"], "vertices": rows}}


def predictions_null_infinity(apps, schema_editor):
    Proposal = apps.get_model("proposals", "Proposal")
    changed = []
    for proposal in Proposal.objects.only("pk", "prediction", "revisions").iterator(chunk_size=BATCH):
        prediction = prediction_null_infinity(proposal.prediction)
        revisions = [{**r, "prediction": prediction_null_infinity(r["prediction"])}
                     if isinstance(r, dict) and "prediction" in r else r for r in proposal.revisions or []]
        if prediction is not proposal.prediction or revisions != (proposal.revisions or []):
            proposal.prediction, proposal.revisions = prediction, revisions
            changed.append(proposal)
    Proposal.objects.bulk_update(changed, ["prediction", "revisions"], batch_size=BATCH)


class Migration(migrations.Migration):

    dependencies = [
        ('proposals', '0013_execution_path_help_text'),
    ]

    operations = [
        migrations.RunPython(predictions_null_infinity, migrations.RunPython.noop),
    ]
