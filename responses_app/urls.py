from __future__ import annotations

from django.urls import path

from . import api

urlpatterns = [
    path("api/requests", api.requests_create, name="api-requests"),
    path("api/requests/<uuid:request_id>", api.requests_detail, name="api-request"),
    path("api/requests/<uuid:request_id>/cancel", api.requests_cancel, name="api-request-cancel"),
]
