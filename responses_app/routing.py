from __future__ import annotations

from django.urls import path

from .consumers import RequestConsumer
from .conversation_events import ConversationConsumer

websocket_urlpatterns = [
    path("ws/requests/<uuid:request_id>/", RequestConsumer.as_asgi()),
    path("ws/conversations/<uuid:conversation_id>/", ConversationConsumer.as_asgi()),
]
