"""Register a streaming job run by ``python -m sparkclient.runner``."""

from django.core.management.base import BaseCommand
from django.utils import timezone

from webapp.jobs.services import job_register
from webapp.proposals.models import Proposal
from webapp.proposals.services import audit


class Command(BaseCommand):
    help = "Register (or update) a job; pending proposals of an earlier run expire."

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True, help="The runner's --job name.")
        parser.add_argument("--topic", default="", help="The log topic its source reads.")
        parser.add_argument("--query-name", default="")

    def handle(self, *args, name: str, topic: str, query_name: str, **options):
        job = job_register(name=name, topic=topic, query_name=query_name)
        for proposal in job.proposals.filter(status=Proposal.Status.PENDING):
            if Proposal.objects.filter(pk=proposal.pk, status=Proposal.Status.PENDING).update(
                    status=Proposal.Status.EXPIRED, decided_at=timezone.now()):
                audit(job=job, proposal=proposal, actor="system", action="expired",
                      before={"status": "pending"}, after={"status": "expired"}, reason="the job was re-registered")
        self.stdout.write(f"Job {job.name!r} registered (id {job.pk}).")
