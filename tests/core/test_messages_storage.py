"""The message storage of a request is made when a message is first added or read
(portal.core.middleware.MessageMiddleware): a probe or an API call makes none, and a page's
message still reaches the next page."""

from django.utils.functional import empty


def test_a_request_that_neither_adds_nor_reads_a_message_makes_no_storage(client) -> None:
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.wsgi_request._messages._wrapped is empty
    assert "messages" not in response.cookies


def test_a_message_added_before_a_redirect_is_shown_once_after_it(client_for, admin_user) -> None:
    client = client_for(admin_user)

    created = client.post(
        "/manage/tenants/new/",
        {
            "slug": "speech",
            "name": "Speech",
            "cost_centre": "CC-9",
            "auto_approve_gpu_eq": "1",
            "auto_approve_hours": 4,
            "default_duration_hours": 8,
            "max_duration_hours": 72,
            "cpu_cores_quota": 8,
            "memory_gib_quota": 32,
            "storage_gib_quota": 100,
        },
        follow=True,
    )
    again = client.get(created.redirect_chain[-1][0])

    assert created.redirect_chain[-1][0] == "/tenants/speech/"
    assert "Tenant speech was created." in created.text
    assert "Tenant speech was created." not in again.text
