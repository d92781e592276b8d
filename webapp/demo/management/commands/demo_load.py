"""Set the demo event generator's rate."""

from django.core.management.base import BaseCommand, CommandError

from sparkclient.demo.generator import set_rate
from webapp.jobs.redis import get_redis


class Command(BaseCommand):
    help = "Set the rate (events/s) of the demo event generator writing to --topic."

    def add_arguments(self, parser):
        parser.add_argument("--rate", type=float, required=True, help="events per second; 0 pauses")
        parser.add_argument("--topic", default="nexmark")

    def handle(self, *args, rate: float, topic: str, **options):
        try:
            set_rate(get_redis(), topic, rate)
        except ValueError as exc:  # negative, NaN or infinite
            raise CommandError(f"--rate: {exc}") from None
        self.stdout.write(f"Generator rate for {topic!r} set to {rate:g} events/s.")
