from __future__ import annotations

from django.urls import path

from . import api, views

app_name = "responses_app"

urlpatterns = [
    path("api/requests", api.requests_create, name="api-requests"),
    path("api/requests/<uuid:request_id>", api.requests_detail, name="api-request"),
    path("api/requests/<uuid:request_id>/cancel", api.requests_cancel, name="api-request-cancel"),
    path("api/requests/<uuid:request_id>/approvals/<str:approval_request_id>", api.requests_approve,
         name="api-request-approve"),
    # pages
    path("", views.conversation_list, name="conversations"),
    path("c/new/", views.conversation_new, name="conversation-new"),
    path("c/<uuid:conversation_id>/", views.chat, name="chat"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/", views.chat_turn, name="chat-turn"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/cancel", views.chat_cancel, name="chat-cancel"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/regenerate", views.chat_regenerate, name="chat-regenerate"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/edit", views.chat_edit, name="chat-edit"),
    path("c/<uuid:conversation_id>/rename", views.conversation_rename, name="conversation-rename"),
    path("c/<uuid:conversation_id>/delete", views.conversation_delete, name="conversation-delete"),
    path("analytics/", views.analytics_page, name="analytics"),
]
