"""Where notifications go (:class:`NotificationTarget`, edited in the admin) and when an identical
notice was last sent (:class:`NoticeSent`, the deduplication that holds across workers)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator, validate_email
from django.db import models

from webapp.inbox.kinds import NoticeKind
from webapp.jobs.addresses import url_host_denial
from webapp.jobs.models import Job

_http_url_validator = URLValidator(schemes=["http", "https"])


def webhook_url_validator(value: str) -> None:
    """A webhook URL is operator-entered configuration: http or https only, to a host the web app
    connects to (``webapp.jobs.addresses.host_denial``; a name is checked again when posting).

    Raises:
        ValidationError: not such a URL (code ``invalid``), or a refused host (the denial's code).
    """
    _http_url_validator(value)
    if denial := url_host_denial(value):
        raise ValidationError(denial.text("Give the endpoint's host name or address"), code=denial.reason.value)


def email_list(text: str) -> list[str]:
    """The addresses of a comma-, semicolon- or newline-separated list (empty entries dropped)."""
    return [part.strip() for part in text.replace(";", ",").replace("\n", ",").split(",") if part.strip()]


class NotificationTarget(models.Model):
    """Where the notices of one job (``job``) or of every job (``job`` empty: deployment-wide) go:
    a webhook (a JSON ``POST`` Slack-compatible endpoints accept) and/or e-mail addresses (Django's
    e-mail backend), for the ``kinds`` chosen (empty: every kind, ``webapp.inbox.kinds.NoticeKind``)."""

    name = models.CharField(max_length=100, help_text="What the target is, e.g. the team's channel.")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, null=True, blank=True, related_name="notification_targets",
                            help_text="Empty: every job of the deployment.")
    webhook_url = models.URLField(max_length=500, blank=True, validators=[webhook_url_validator],
                                  help_text="http or https URL that receives a JSON POST: {\"text\", \"kind\", "
                                            "\"job\", \"proposal\", \"url\", \"at\", \"data\"}.")
    emails = models.TextField(blank=True, help_text="E-mail addresses, separated by commas or new lines.")
    kinds = models.JSONField(default=list, blank=True,
                             help_text="The notice kinds sent (webapp.inbox.kinds.NoticeKind values); empty: all.")
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["job__name", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.job or 'every job'})"

    def clean(self) -> None:
        """A webhook or an address is required; every address and kind must be valid."""
        errors: dict[str, list[str]] = {}
        if not self.webhook_url and not self.emails.strip():
            errors["webhook_url"] = ["Give a webhook URL, e-mail addresses, or both."]
        bad = []
        for address in email_list(self.emails):
            try:
                validate_email(address)
            except ValidationError:
                bad.append(address)
        if bad:
            errors["emails"] = [f"Not an e-mail address: {', '.join(bad)}."]
        unknown = [k for k in self.kinds or () if k not in NoticeKind.values]
        if not isinstance(self.kinds, list) or unknown:
            errors["kinds"] = [f"A list of {', '.join(NoticeKind.values)}; unknown: {unknown or self.kinds}."]
        if errors:
            raise ValidationError(errors)

    def wants(self, kind: str) -> bool:
        return self.enabled and (not self.kinds or kind in self.kinds)


class NoticeSent(models.Model):
    """The last time a notice with this ``key`` (job, kind and key data) was sent: an identical
    notice is sent at most once per ``SCALER_NOTIFY_INTERVAL_S`` (Flink's
    ``job.autoscaler.scaling.event.interval``, ``AutoScalerEventHandler``). One row per key, claimed
    with a conditional UPDATE, so two workers never both send it."""

    key = models.CharField(max_length=64, unique=True, help_text="sha256 of job, kind and key data.")
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=40, choices=NoticeKind.choices)
    last_sent_at = models.DateTimeField()
    count = models.PositiveIntegerField(default=1, help_text="How many times it was sent.")

    class Meta:
        ordering = ["-last_sent_at"]
        verbose_name_plural = "notices sent"
