from __future__ import annotations

from django.urls import path

from .consumers import RequestConsumer

websocket_urlpatterns = [
    path("ws/requests/<uuid:request_id>/", RequestConsumer.as_asgi()),
]
