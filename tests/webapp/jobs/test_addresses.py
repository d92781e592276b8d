"""One address check for every host the web app fetches from or posts to (``webapp.jobs.addresses``,
``webapp.jobs.connect``): each spelling of a host is read as the system resolver reads it and refused
or accepted alike by the registration (URL and host patterns), the API, the admin's forms, the
notification targets and the connection itself."""

from __future__ import annotations

import ipaddress
import json
import socket
import sys

import httpx
import pytest
from django.core.exceptions import ValidationError
from hypothesis import given
from hypothesis import strategies as st

from tests.webapp.factories import job_admin_form, make_user
from webapp.inbox.admin import NotificationTargetForm
from webapp.inbox.models import NotificationTarget
from webapp.inbox.tasks import webhook_deliver
from webapp.jobs.addresses import Denied, host_denial, ipv4_reading, read_address
from webapp.jobs.connect import AddressRefused, GuardedTransport
from webapp.jobs.models import Job
from webapp.jobs.sparkui import Refusal, RefusalCode, UiRule, UiTarget, rule_errors, ui_target

LINK, META, UNSPEC = Denied.LINK_LOCAL, Denied.METADATA, Denied.UNSPECIFIED
#: Refused as written only: the address is allowed, the spelling hides it (``2130706433`` is 127.0.0.1).
DOTS, AS_V6 = Denied.NOT_DOTTED, Denied.IPV4_AS_IPV6
#: Refused when connecting too: the address (or name) itself is denied.
DENIED_ON_CONNECT = (LINK, META, UNSPEC)

#: (host as a URL writes it, why it is refused or None when it is accepted).
SPELLINGS = [
    # 169.254.169.254 (cloud metadata) in every numeric form inet_aton reads.
    ("169.254.169.254", LINK), ("2852039166", LINK), ("0xa9fea9fe", LINK), ("0XA9FEA9FE", LINK),
    ("025177524776", LINK), ("0251.0376.0251.0376", LINK), ("0xa9.0xfe.0xa9.0xfe", LINK),
    ("169.254.43518", LINK), ("169.16689662", LINK), ("0xa9.16689662", LINK), ("0251.0xfe.43518", LINK),
    ("169.254.169.0376", LINK), ("00251.00376.00251.00376", LINK), ("0x00a9.0x0fe.0xa9.0xfe", LINK),
    ("169.254.0xa9fe", LINK),
    # ... and carried by IPv6: mapped, compatible, translated, NAT64, 6to4, Teredo, ISATAP; fe80::/10.
    ("[::ffff:169.254.169.254]", LINK), ("[::ffff:a9fe:a9fe]", LINK), ("[::a9fe:a9fe]", LINK),
    ("[::169.254.169.254]", LINK), ("[::ffff:0:a9fe:a9fe]", LINK), ("[64:ff9b::a9fe:a9fe]", LINK),
    ("[64:ff9b::169.254.169.254]", LINK), ("[64:ff9b:1::a9fe:a9fe]", LINK), ("[2002:a9fe:a9fe::]", LINK),
    ("[2002:a9fe:a9fe:1::1]", LINK), ("[2001:0:a9fe:a9fe::1]", LINK),
    ("[2001:0:4136:e378:8000:63bf:5601:5601]", LINK), ("[2001:db8::5efe:a9fe:a9fe]", LINK),
    ("[2001:db8::200:5efe:a9fe:a9fe]", LINK), ("[fe80::1]", LINK), ("[FE80::a9fe:a9fe]", LINK),
    # Other metadata services.
    ("100.100.100.200", META), ("1684301000", META), ("0x646464c8", META), ("[::ffff:100.100.100.200]", META),
    ("[64:ff9b::6464:64c8]", META), ("[fd00:ec2::254]", META), ("metadata.google.internal", META),
    ("METADATA.Google.Internal", META),
    # 0.0.0.0 (no host: connecting reaches this machine).
    ("0.0.0.0", UNSPEC), ("0", UNSPEC), ("0x0", UNSPEC), ("00", UNSPEC), ("0.0", UNSPEC), ("0.0.0", UNSPEC),
    ("0x0.0x0.0x0.0x0", UNSPEC), ("000.000.000.000", UNSPEC), ("0x00000000", UNSPEC), ("[::]", UNSPEC),
    ("[::ffff:0.0.0.0]", UNSPEC), ("[::0.0.0.0]", UNSPEC), ("[64:ff9b::]", UNSPEC), ("[2002::1]", UNSPEC),
    # 127.0.0.1 is allowed, but only written as 127.0.0.1.
    ("127.0.0.1", None), ("2130706433", DOTS), ("0x7f000001", DOTS), ("017700000001", DOTS), ("0177.0.0.1", DOTS),
    ("0x7f.0.0.1", DOTS), ("127.1", DOTS), ("127.0.1", DOTS), ("127.0.0.01", DOTS), ("0x7f.1", DOTS),
    ("127.000.000.001", DOTS), ("[::ffff:127.0.0.1]", AS_V6), ("[::ffff:7f00:1]", AS_V6), ("[::127.0.0.1]", AS_V6),
    ("012.0.0.7", DOTS),
    # Accepted addresses and names.
    ("10.0.0.7", None), ("192.168.1.20", None), ("8.8.8.8", None), ("[::1]", None), ("[2001:db8::1]", None),
    ("[fd12:3456:789a::1]", None), ("[64:ff9b::a00:7]", None), ("localhost", None), ("driver.example.com", None),
    ("spark-driver.default.svc.cluster.local", None), ("0x7f.example.com", None), ("metadata.example.com", None),
]
#: Where the test resolver sends every name.
NAME_ADDRESS = ipaddress.ip_address("10.0.0.7")


def _bare(host: str) -> str:
    return host.strip("[]")


def _ui_url(host: str) -> str:
    return f"http://{host}:4040"


def _webhook(host: str) -> str:
    return f"http://{host}/hook"


def test_the_table_is_large_and_covers_each_reason():
    assert len(SPELLINGS) >= 60 and len({host for host, _ in SPELLINGS}) == len(SPELLINGS)
    assert {code for _, code in SPELLINGS} == {*Denied, None}


@pytest.mark.parametrize(("host", "code"), SPELLINGS)
def test_each_spelling_is_refused_or_accepted_by_the_registration_and_the_connection(host, code):
    denial = host_denial(_bare(host).lower())
    assert (denial.reason if denial else None) == code
    url_rule = {"spark_ui_url": _ui_url(host), "spark_ui_hosts": [], "spark_ui_ports": "4040-4056"}
    hosts_rule = {"spark_ui_url": "", "spark_ui_hosts": [_bare(host)], "spark_ui_ports": "4040-4056"}
    for rule, field in ((url_rule, "spark_ui_url"), (hosts_rule, "spark_ui_hosts")):
        errors = rule_errors(**rule)
        assert list(errors) == ([field] if code else []), errors
        assert (UiRule.of(**rule) is None) == bool(code)
    # Connecting: the address the host reads as (a name: what the test resolver gives) is checked again.
    sent: list[httpx.Request] = []
    transport = GuardedTransport(resolver=lambda name, port: [NAME_ADDRESS],
                                 inner=httpx.MockTransport(lambda request: sent.append(request) or httpx.Response(200)))
    try:
        url = httpx.URL(_ui_url(host))
    except httpx.InvalidURL:  # httpx refuses some spellings itself (0177.0.0.1): nothing is sent to them
        assert code
        return
    with httpx.Client(transport=transport) as client:
        if code in DENIED_ON_CONNECT:
            with pytest.raises(AddressRefused) as refused:
                client.get(url)
            assert refused.value.denial.reason == code and sent == []
        else:
            assert client.get(url).status_code == 200
            [request] = sent
            address = read_address(_bare(host).lower()) or NAME_ADDRESS
            assert read_address(request.url.host) == address and request.url.port == 4040
            assert request.headers["host"] == f"{host.lower()}:4040"


@pytest.mark.django_db
@pytest.mark.parametrize(("host", "code"), SPELLINGS)
def test_each_spelling_is_refused_or_accepted_by_the_api_the_admin_and_the_notification_targets(
        host, code, admin_api, monkeypatch):
    for number, body in enumerate(({"spark_ui_url": _ui_url(host)},
                                   {"spark_ui_hosts": [_bare(host)], "spark_ui_ports": "4040-4056"})):
        answer = admin_api.post("/api/jobs/", json.dumps({"name": f"job-{number}", **body}),
                                content_type="application/json")
        assert answer.status_code == (400 if code else 201), answer.content
        if code:
            assert list(answer.json()) == list(body)[:1]
    assert Job.objects.count() == (0 if code else 2)
    site_admin = make_user("site-admin", role="admin")
    url_form = job_admin_form(site_admin, name="admin-url", spark_ui_url=_ui_url(host))
    hosts_form = job_admin_form(site_admin, name="admin-hosts", spark_ui_hosts=json.dumps([_bare(host)]))
    for form, field in ((url_form, "spark_ui_url"), (hosts_form, "spark_ui_hosts")):
        assert form.is_valid() == (code is None) and (field in form.errors) == bool(code), form.errors
    # Notification targets: the model, the admin's form, and the delivery (which makes no request).
    target_form = NotificationTargetForm(data={"name": "team", "webhook_url": _webhook(host), "emails": "",
                                               "enabled": "on"})
    assert target_form.is_valid() == (code is None) and ("webhook_url" in target_form.errors) == bool(code)
    target = NotificationTarget(name="team", webhook_url=_webhook(host))
    if code:
        with pytest.raises(ValidationError) as invalid:
            target.full_clean()
        assert list(invalid.value.message_dict) == ["webhook_url"]
        monkeypatch.setattr(httpx.HTTPTransport, "handle_request", _no_request)
        assert webhook_deliver.run(_webhook(host), {"text": "x"}) is None
    else:
        target.full_clean()


def _no_request(*args, **kwargs):
    raise AssertionError("a refused webhook was posted")


def test_a_reported_url_is_matched_by_the_address_it_connects_to():
    local = UiRule.of(spark_ui_url="", spark_ui_hosts=["127.0.0.1"], spark_ui_ports="4040-4056")
    app_id = "local-1700000000000"
    for spelled in ("2130706433", "0x7f.1", "0177.0.0.1"):
        target = ui_target(local, ui_url=_ui_url(spelled), app_id=app_id)
        assert target == UiTarget(base_url="http://127.0.0.1:4040", app_id=app_id)
    private = UiRule.of(spark_ui_url="", spark_ui_hosts=["*.example.com", "10.0.0.0/8"], spark_ui_ports="4040")
    refused = ui_target(private, ui_url=_ui_url("0xa9fea9fe"), app_id=app_id)
    assert isinstance(refused, Refusal) and refused.code == RefusalCode.HOST_NOT_ALLOWED
    assert refused.reported == "169.254.169.254"


def test_a_name_that_resolves_to_a_denied_address_is_refused_when_connecting():
    resolved = {"drivers.example.com": ["10.0.0.8", "169.254.169.254"], "rebound.example.com": ["fd00:ec2::254"],
                "plain.example.com": ["10.0.0.8"]}
    sent: list[httpx.Request] = []
    transport = GuardedTransport(resolver=lambda name, port: [ipaddress.ip_address(a) for a in resolved[name]],
                                 inner=httpx.MockTransport(lambda request: sent.append(request) or httpx.Response(200)))
    with httpx.Client(transport=transport) as client:
        with pytest.raises(AddressRefused) as refused:
            client.get("https://drivers.example.com:4040/api/v1/applications")
        assert refused.value.to_json() == {"code": "link_local", "value": "169.254.169.254", "address": "",
                                           "embedding": "", "name": "drivers.example.com"}
        assert "drivers.example.com (resolved to 169.254.169.254)" in str(refused.value)
        with pytest.raises(AddressRefused) as refused:
            client.post("http://rebound.example.com/hook")
        assert refused.value.denial.reason == META
        assert sent == []
        # An allowed name is connected to at the address checked, with its name for TLS and Host.
        assert client.get("https://plain.example.com:4040/api/v1/applications").status_code == 200
    [request] = sent
    assert str(request.url) == "https://10.0.0.8:4040/api/v1/applications"
    assert request.headers["host"] == "plain.example.com:4040"
    assert request.extensions["sni_hostname"] == "plain.example.com"


def test_each_checked_address_is_tried_in_turn_as_the_system_tries_them():
    tried: list[str] = []

    def inner(request: httpx.Request) -> httpx.Response:
        tried.append(request.url.host)
        if request.url.host != "10.0.0.8":
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200)

    addresses = [ipaddress.ip_address(a) for a in ("::1", "10.0.0.8", "10.0.0.9")]
    transport = GuardedTransport(resolver=lambda name, port: addresses, inner=httpx.MockTransport(inner))
    with httpx.Client(transport=transport) as client:
        assert client.get("http://localhost:4040/").status_code == 200
        assert tried == ["::1", "10.0.0.8"]
        addresses[1:] = []
        with pytest.raises(httpx.ConnectError):
            client.get("http://localhost:4040/")


def test_a_name_that_does_not_resolve_is_a_transport_error():
    def nowhere(name, port):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with httpx.Client(transport=GuardedTransport(resolver=nowhere, inner=httpx.MockTransport(_no_request))) as client:
        with pytest.raises(httpx.ConnectError):
            client.get("http://gone.example.com/")


@pytest.mark.skipif(sys.platform != "linux", reason="compares with glibc's inet_aton")
@given(st.text(alphabet="0123456789abcdefxX.", min_size=1, max_size=24))
def test_numeric_hosts_read_as_the_system_reads_them(text):
    try:
        system = ipaddress.IPv4Address(socket.inet_aton(text))
    except OSError:
        system = None
    assert ipv4_reading(text) == system
