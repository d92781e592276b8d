"""The registration's deny-list (``webapp.jobs.sparkui_limits``): link-local and metadata addresses,
unspecified addresses, networks wider than /8 or /48 and port ranges of more than 32 ports are
refused with an error naming the field and what to do; the usual rules are accepted."""

from __future__ import annotations

import json

import pytest

from webapp.jobs.models import Job
from webapp.jobs.sparkui import UiRule, rule_errors
from webapp.jobs.sparkui_limits import MAX_PORTS

#: (field, value, words the error must carry) of each refused registration.
REFUSED = [
    ("spark_ui_url", "http://169.254.169.254:80", "link-local"),
    ("spark_ui_url", "http://169.254.169.254", "link-local"),
    ("spark_ui_url", "http://[fe80::1]:4040", "link-local"),
    ("spark_ui_url", "http://[fd00:ec2::254]:80", "metadata"),
    ("spark_ui_url", "http://100.100.100.200:80", "metadata"),
    ("spark_ui_url", "http://metadata.google.internal", "metadata"),
    ("spark_ui_url", "http://0.0.0.0:4040", "unspecified"),
    ("spark_ui_url", "http://[::]:4040", "unspecified"),
    ("spark_ui_url", "http://[::ffff:169.254.169.254]:80", "link-local"),
    ("spark_ui_url", "http://[::ffff:127.0.0.1]:4040", "written as IPv6"),
    ("spark_ui_hosts", ["0.0.0.0/0"], "wider than /8"),
    ("spark_ui_hosts", ["::/0"], "wider than /48"),
    ("spark_ui_hosts", ["10.0.0.0/7"], "wider than /8"),
    ("spark_ui_hosts", ["2001:db8::/32"], "wider than /48"),
    ("spark_ui_hosts", ["169.254.0.0/16"], "link-local"),
    ("spark_ui_hosts", ["169.254.169.254"], "link-local"),
    ("spark_ui_hosts", ["169.254.169.254/32"], "link-local"),
    ("spark_ui_hosts", ["fe80::/10"], "wider than /48"),
    ("spark_ui_hosts", ["fe80::/64"], "link-local"),
    ("spark_ui_hosts", ["fd00:ec2::254"], "metadata"),
    ("spark_ui_hosts", ["fd00:ec2::/64"], "metadata"),
    ("spark_ui_hosts", ["100.64.0.0/10"], "metadata"),
    ("spark_ui_hosts", ["0.0.0.0"], "unspecified"),
    ("spark_ui_hosts", ["::"], "unspecified"),
    ("spark_ui_hosts", ["127.0.0.1", "metadata.google.internal"], "metadata"),
    ("spark_ui_hosts", ["*.google.internal"], "metadata"),
    ("spark_ui_hosts", ["::ffff:a9fe:a9fe"], "link-local"),
    ("spark_ui_hosts", ["::ffff:7f00:1"], "written as IPv6"),
    ("spark_ui_ports", "1-65535", "spans 65535 ports"),
    ("spark_ui_ports", "4040-4072", f"spans 33 ports, more than {MAX_PORTS}"),
]
#: Rules as registered in practice: accepted.
ACCEPTED = [
    {"spark_ui_url": "http://driver-host:4040"},
    {"spark_ui_url": "http://127.0.0.1:4040"},
    {"spark_ui_url": "http://10.0.0.7:4040"},
    {"spark_ui_url": "https://[fd12:3456:789a::1]:4040"},
    {"spark_ui_hosts": ["127.0.0.1", "localhost"], "spark_ui_ports": "4040-4056"},
    {"spark_ui_hosts": ["10.0.0.0/8"], "spark_ui_ports": "4040"},
    {"spark_ui_hosts": ["10.42.0.0/16", "192.168.1.0/24"], "spark_ui_ports": "4040-4071"},
    {"spark_ui_hosts": ["fd12:3456:789a::/48", "::1"], "spark_ui_ports": "4040-4056"},
    {"spark_ui_hosts": ["*.spark.svc.cluster.local"], "spark_ui_ports": "4040-4056"},
    {"spark_ui_hosts": ["metadata.example.com"], "spark_ui_ports": "4040-4056"},
]
_RULE = {"spark_ui_url": "", "spark_ui_hosts": ["127.0.0.1"], "spark_ui_ports": "4040-4056"}


def _rule(field, value) -> dict:
    return {**_RULE, field: value, **({"spark_ui_hosts": []} if field == "spark_ui_url" else {})}


@pytest.mark.parametrize(("field", "value", "words"), REFUSED)
def test_refused_registrations_name_the_field_and_what_to_do(field, value, words):
    rule = _rule(field, value)
    errors = rule_errors(**rule)
    assert list(errors) == [field], errors
    [message] = errors[field]
    assert message.startswith(f"{field}: ") and words in message, message
    assert "Give" in message or "write the IPv4 address" in message, message
    # A rule stored before the deny-list existed is not used either: the collector fetches nothing.
    assert UiRule.of(**rule) is None


@pytest.mark.parametrize("rule", ACCEPTED)
def test_the_usual_rules_are_accepted(rule):
    full = {**_RULE, **rule, **({"spark_ui_hosts": []} if "spark_ui_url" in rule else {})}
    assert rule_errors(**full) == {}
    assert UiRule.of(**full) is not None


@pytest.mark.django_db
@pytest.mark.parametrize(("field", "value", "words"), REFUSED)
def test_the_api_refuses_them_with_a_400_naming_the_field_and_saves_nothing(admin_api, field, value, words):
    body = {"name": "x", field: value}
    refused = admin_api.post("/api/jobs/", json.dumps(body), content_type="application/json")
    assert refused.status_code == 400 and list(refused.json()) == [field], refused.content
    assert words in refused.json()[field][0]
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_the_api_registers_an_accepted_rule(admin_api):
    for number, rule in enumerate(ACCEPTED):
        body = {"name": f"job-{number}", **rule}
        created = admin_api.post("/api/jobs/", json.dumps(body), content_type="application/json")
        assert created.status_code == 201, created.content
    assert Job.objects.count() == len(ACCEPTED)
