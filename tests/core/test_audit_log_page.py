import re

import pytest
from django.template import engines
from django.utils import translation

from portal.accounts.services import user_create
from portal.core.audit import audit_record
from portal.core.models import AuditEvent
from tenants.models import MemberRole
from tenants.services import membership_set, tenant_update


@pytest.fixture
def history(admin_user, lead, developer, outsider, tenant_a, tenant_b):
    """Events in both tenants: by the admin, the lead (in A) and the outsider's tenant (B)."""
    tenant_update(actor=admin_user, tenant=tenant_a, cost_centre="CC-A-NEW")
    tenant_update(actor=admin_user, tenant=tenant_b, cost_centre="CC-B-NEW")
    newcomer = user_create(actor=None, username="newcomer")
    membership_set(actor=lead, tenant=tenant_a, user=newcomer, role=MemberRole.DEVELOPER)


def test_lead_sees_their_tenants_events_but_not_other_tenants(client_for, lead, history) -> None:
    response = client_for(lead).get("/audit/?action=tenant.update")

    assert response.status_code == 200
    assert "CC-A-NEW" in response.text
    assert "CC-B-NEW" not in response.text


def test_developer_sees_only_their_own_actions(client_for, developer, history) -> None:
    response = client_for(developer).get("/audit/")

    assert response.status_code == 200
    assert "CC-A-NEW" not in response.text
    assert "No events match." in response.text


def test_outsider_sees_nothing_of_tenant_a(client_for, outsider, history) -> None:
    response = client_for(outsider).get("/audit/?tenant=vision")

    assert response.status_code == 200
    assert "No events match." in response.text


def test_finance_sees_every_tenant_and_filters_by_tenant(client_for, finance_user, history) -> None:
    everything = client_for(finance_user).get("/audit/?action=tenant.update")
    only_b = client_for(finance_user).get("/audit/?tenant=nlp&action=tenant.update")

    assert "CC-A-NEW" in everything.text
    assert "CC-B-NEW" in everything.text
    assert "CC-A-NEW" not in only_b.text
    assert "CC-B-NEW" in only_b.text


def test_a_bad_filter_names_the_field(client_for, admin_user, history) -> None:
    response = client_for(admin_user).get("/audit/?since=yesterday-ish")

    assert response.status_code == 200
    assert "Since: Enter a valid date/time." in response.text


def test_audit_page_queries_do_not_grow_with_events(
    client_for, admin_user, tenant_a, django_assert_max_num_queries
) -> None:
    for number in range(120):
        tenant_update(actor=admin_user, tenant=tenant_a, cost_centre=f"CC-{number}")
    client = client_for(admin_user)

    with django_assert_max_num_queries(6):
        response = client.get("/audit/")

    assert response.status_code == 200
    assert "Page 1 of 3" in response.text


def test_each_change_shows_its_value_before_and_after(client_for, admin_user, history) -> None:
    audit_record(
        actor=None,
        action="odd.change",
        target=admin_user,
        changes={"pair": ["old", "new"], "created": [None, 7]},
    )
    response = client_for(admin_user).get("/audit/?action=odd.change")

    assert response.status_code == 200
    text = " ".join(response.text.split())
    assert "<strong>pair</strong>: old → new" in text
    assert "<strong>created</strong>: ∅ → 7" in text
    assert "<td>—</td>" in text  # no tenant
    in_a = client_for(admin_user).get("/audit/?action=tenant.update&tenant=vision")
    assert "<td>vision</td>" in in_a.text
    assert "CC-A-NEW</div>" in in_a.text


def test_a_change_that_is_not_a_pair_is_shown_as_its_value_after() -> None:
    event = AuditEvent(changes={"pair": [1, 2], "odd": "as is", "three": [1, 2, 3]})

    assert event.change_rows == [("pair", 1, 2), ("odd", None, "as is"), ("three", None, [1, 2, 3])]


# The rows as `templates/core/audit.html` wrote them before `portal.core.cells` did.
ROW_TEMPLATE = """{% load i18n %}{% for event in events %}
        <tr>
          <td>{{ event.at|date:"DATETIME_FORMAT" }}</td>
          <td>{% if event.actor_name %}<span translate="no">{{ event.actor_name }}</span>{% else %}{% translate "system" %}{% endif %}</td>
          <td><code>{{ event.action }}</code></td>
          <td translate="no">{{ event.target_name }} <small>{{ event.target_type }}:{{ event.target_id }}</small></td>
          <td>{% if event.tenant_id %}{{ event.tenant.slug }}{% else %}—{% endif %}</td>
          <td>{% for field, before, after in event.change_rows %}<div translate="no"><strong>{{ field }}</strong>: {{ before|default_if_none:"∅" }} → {{ after|default_if_none:"∅" }}</div>{% endfor %}{% if event.comment %}<div class="help">“{% translate event.comment %}”</div>{% endif %}</td>
          <td><small>{{ event.source_ip|default:"" }} {{ event.request_id|truncatechars:12 }}</small></td>
        </tr>{% endfor %}"""  # noqa: E501


def test_the_rows_are_written_as_the_template_wrote_them(client_for, admin_user, tenant_a) -> None:
    """The page's rows (`portal.core.cells`) against the template loop they replace, in
    Chinese, over events with markup, quotes, numbers, booleans, nested JSON, empty and long
    values."""
    AuditEvent.objects.create(
        actor=admin_user, actor_name="<b>o'neil</b>", action="odd.<i>", target_type="t&t",
        target_id='7"', target_name="", tenant=tenant_a, comment="Released: <ended>",
        changes={"n": [1234567, 2.5], "flag": [True, None], "deep": {"a": ["<x>"]}, "": "&"},
        request_id="r" * 40, source_ip="2001:db8::1",
    )  # fmt: skip
    AuditEvent.objects.create(
        actor=None, action="plain", target_type="x", target_id="1", target_name="name",
        changes={}, request_id="", source_ip=None,
    )  # fmt: skip

    response = client_for(admin_user).get("/audit/", HTTP_ACCEPT_LANGUAGE="zh-hans")

    events = list(AuditEvent.objects.select_related("tenant").order_by("-at", "-id"))
    with translation.override("zh-hans"):
        expected = engines["django"].from_string(ROW_TEMPLATE).render({"events": events})
    shown = re.search(r"<tbody>(.*)</tbody>", response.text, re.S)
    assert shown is not None
    between_tags = re.compile(r">\s+<")
    assert between_tags.sub("><", shown.group(1).strip()) == between_tags.sub(
        "><", expected.strip()
    )
    assert "&lt;b&gt;o&#x27;neil&lt;/b&gt;" in expected
    assert "系统" in expected  # "system", translated
