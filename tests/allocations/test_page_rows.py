"""*My requests* and *All requests* write their rows in Python (portal/allocations/page_rows.py):
each page's rows against the template loop they replaced, in Chinese, over requests in every
state a row shows differently (waiting for a lead, an approved allocation with its run queued,
an active one with an extension waiting, a refusal with a comment, a release)."""

import re
from datetime import timedelta

import pytest
from django.template import engines
from django.utils import timezone, translation

from portal.allocations.models import ExtensionState, GpuRequest, GpuRequestExtension, RequestState
from portal.allocations.services import gpu_request_submit
from portal.catalog.services import gpu_pool_create
from portal.cluster.services import cluster_create

# The rows as templates/allocations/all.html wrote them (with the multiplication sign).
# ruff: noqa: RUF001
ALL_ROWS = """{% load i18n gpu_eq %}{% for gpu_request in page %}
      <tr>
        <td>{{ gpu_request.pk }}</td>
        <td>{{ gpu_request.created_at|date:"DATETIME_FORMAT" }}</td>
        <td>{{ gpu_request.tenant.slug }}</td>
        <td>{{ gpu_request.requester.username }}</td>
        <td><a href="{% url 'allocations:detail' gpu_request.pk %}">{{ gpu_request.count }} × {{ gpu_request.offering.name }}</a></td>
        <td title="{{ gpu_request.gpu_eq }}">{{ gpu_request.gpu_eq|gpu_eq }}</td>
        <td>{% include "allocations/_state.html" %}</td>
        <td>{{ gpu_request.ends_at|date:"DATETIME_FORMAT"|default:"—" }}</td>
        {% if user.is_portal_admin %}<td>{% if gpu_request.state == "approved" or gpu_request.state == "active" %}
          <form method="post" action="{% url 'allocations:transition' gpu_request.pk 'revoke' %}" class="inline" hx-post="{% url 'allocations:transition' gpu_request.pk 'revoke' %}" hx-target="body" hx-swap="beforeend">{% csrf_token %}<input type="hidden" name="next" value="{% url 'allocations:all' %}"><input name="comment" required placeholder="{% translate 'reason' %}" aria-label="{% blocktranslate with pk=gpu_request.pk %}Reason to revoke {{ pk }}{% endblocktranslate %}"><button type="submit" class="danger">{% translate "Revoke" %}</button></form>
        {% endif %}</td>{% endif %}
      </tr>{% endfor %}"""  # noqa: E501

# The rows as templates/allocations/mine.html wrote them, with _extension_cell.html in place.
MY_ROWS = """{% load i18n gpu_eq %}{% for gpu_request in page %}
        <tr>
          <td>{{ gpu_request.pk }}</td>
          <td>{{ gpu_request.tenant.slug }}</td>
          <td><a href="{% url 'allocations:detail' gpu_request.pk %}">{{ gpu_request.count }} × {{ gpu_request.offering.name }}</a></td>
          <td title="{{ gpu_request.gpu_eq }}">{{ gpu_request.gpu_eq|gpu_eq }}</td>
          <td>{% include "allocations/_state.html" %}{% if gpu_request.decision_comment %}<br><small>{% translate gpu_request.decision_comment %}</small>{% endif %}</td>
          <td data-testid="time-left-{{ gpu_request.pk }}" data-ends-at="{{ gpu_request.ends_at|date:'c' }}">{% if gpu_request.state == "approved" or gpu_request.state == "active" %}{{ gpu_request.ends_at|timeuntil }}{% else %}—{% endif %}</td>
          <td data-testid="cost-{{ gpu_request.pk }}">{{ gpu_request.cost|default:"—" }}</td>
          <td>
            {% if gpu_request.state == "pending" %}
              <form method="post" action="{% url 'allocations:transition' gpu_request.pk 'cancel' %}" class="inline">{% csrf_token %}<button type="submit">{% translate "Cancel" %}</button></form>
            {% elif gpu_request.state == "approved" or gpu_request.state == "active" %}
              <a href="{% url 'workloads:new' %}?allocation={{ gpu_request.pk }}">{% translate "Launch a notebook" %}</a>
              <form method="post" action="{% url 'allocations:transition' gpu_request.pk 'release' %}" class="inline" hx-post="{% url 'allocations:transition' gpu_request.pk 'release' %}" hx-target="body" hx-swap="beforeend">{% csrf_token %}<button type="submit">{% translate "Release" %}</button></form>
              {% if gpu_request.pending_extension %}
<br><span class="state pending" data-testid="extension-waiting-{{ gpu_request.pk }}">{% blocktranslate with hours=gpu_request.pending_extension.hours %}Extension by {{ hours }} h waiting for a lead{% endblocktranslate %}</span>
<form method="post" action="{% url 'allocations:extension-decide' gpu_request.pending_extension.pk 'cancel' %}" class="inline">{% csrf_token %}<button type="submit" aria-label="{% blocktranslate with id=gpu_request.pk %}Cancel extension of request {{ id }}{% endblocktranslate %}">{% translate "Cancel extension" %}</button></form>
{% else %}
<form method="post" action="{% url 'allocations:extend' gpu_request.pk %}" class="inline">{% csrf_token %}<input type="number" name="hours" min="1" value="1" aria-label="{% translate 'Hours to extend' %}" class="narrow-input"><button type="submit">{% translate "Extend" %}</button></form>
{% endif %}
            {% endif %}
          </td>
        </tr>{% endfor %}"""  # noqa: E501


def tags_only(html: str) -> str:
    """`html` without whitespace between tags, and with each CSRF token the same (each is
    masked anew: any of them is the page's)."""
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', 'name="csrfmiddlewaretoken"', html)
    return re.sub(r">\s+<", "><", html.strip())


def shown_rows(html: str) -> str:
    body = re.search(r"<tbody>(.*?)</tbody>", html, re.S)
    assert body
    return tags_only(body.group(1))


@pytest.fixture
def requests_in_every_state(developer, admin_user, a100_tenant, catalog) -> list[GpuRequest]:
    cluster_create(actor=admin_user, name="lab")
    whole = catalog["a100-80gb-whole"]
    gpu_pool_create(
        actor=admin_user, cluster="lab", name="a100", gpu_model=whole.gpu_model,
        backend=whole.backend, node_count=1,
    )  # fmt: skip
    rows = [
        gpu_request_submit(actor=developer, tenant=a100_tenant, offering=whole, count=1)
        for _ in range(5)
    ]
    queued, pending, active, refused, released = rows
    assert queued.state == RequestState.APPROVED
    GpuRequest.objects.filter(pk=pending.pk).update(state=RequestState.PENDING)
    # Mid-minute, so that "time left" reads the same however long the page takes.
    ends = timezone.now() + timedelta(hours=3, seconds=30)
    GpuRequest.objects.filter(pk=active.pk).update(state=RequestState.ACTIVE, ends_at=ends)
    GpuRequestExtension.objects.create(
        request=active, hours=4, reason="more", requested_by=developer,
        state=ExtensionState.PENDING,
    )  # fmt: skip
    GpuRequest.objects.filter(pk=refused.pk).update(
        state=RequestState.REJECTED, decision_comment="<b>No</b> & 'not now'"
    )
    GpuRequest.objects.filter(pk=released.pk).update(state=RequestState.RELEASED)
    return rows


def test_my_requests_rows_are_written_as_the_template_wrote_them(
    client_for, developer, requests_in_every_state
) -> None:
    response = client_for(developer).get("/requests/", HTTP_ACCEPT_LANGUAGE="zh-hans")

    assert response.status_code == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.text)
    assert token
    with translation.override("zh-hans"):
        expected = (
            engines["django"]
            .from_string(MY_ROWS)
            .render({"page": response.context["page"], "csrf_token": token.group(1)})
        )
    assert shown_rows(response.text) == tags_only(expected)
    assert "&lt;b&gt;No&lt;/b&gt; &amp; &#x27;not now&#x27;" in expected
    assert 'data-testid="extension-waiting-' in expected
    assert 'data-testid="waiting-link-' in expected


def test_all_requests_rows_are_written_as_the_template_wrote_them(
    client_for, admin_user, finance_user, requests_in_every_state
) -> None:
    for user in (admin_user, finance_user):  # finance has no column to revoke
        response = client_for(user).get("/manage/requests/", HTTP_ACCEPT_LANGUAGE="zh-hans")

        assert response.status_code == 200
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.text)
        with translation.override("zh-hans"):
            expected = (
                engines["django"]
                .from_string(ALL_ROWS)
                .render(
                    {
                        "page": response.context["page"],
                        "user": user,
                        "csrf_token": token.group(1) if token else "",
                    }
                )
            )
        assert shown_rows(response.text) == tags_only(expected)
        assert ('class="danger">收回</button>' in expected) == (user == admin_user)  # "Revoke"
