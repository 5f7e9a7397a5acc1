from __future__ import annotations

from django.urls import path

from . import branch_views, frontends_views, jsonapi, search_views, share_views, views, views_render

app_name = "responses_app"

urlpatterns = [
    path("api/requests", jsonapi.requests_create, name="api-requests"),
    path("api/requests/<uuid:request_id>", jsonapi.requests_detail, name="api-request"),
    path("api/requests/<uuid:request_id>/cancel", jsonapi.requests_cancel, name="api-request-cancel"),
    path("api/requests/<uuid:request_id>/approvals/<str:approval_request_id>", jsonapi.requests_approve,
         name="api-request-approve"),
    # front ends: AG-UI and the Vercel AI SDK's useChat (frontends_views.py, docs/frontends.md)
    path("api/agui/runs", frontends_views.agui_run, name="agui-run"),
    path("api/agui/requests/<uuid:request_id>/stream", frontends_views.agui_stream, name="agui-stream"),
    path("api/aisdk/chat", frontends_views.aisdk_chat, name="aisdk-chat"),
    path("api/aisdk/chat/<str:key>/stream", frontends_views.aisdk_stream, name="aisdk-stream"),
    # pages
    path("", views.conversation_list, name="conversations"),
    path("c/new/", views.conversation_new, name="conversation-new"),
    path("c/<uuid:conversation_id>/", views.chat, name="chat"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/", views.chat_turn, name="chat-turn"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/cancel", views.chat_cancel, name="chat-cancel"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/regenerate", views.chat_regenerate, name="chat-regenerate"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/edit", views.chat_edit, name="chat-edit"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/show", branch_views.chat_show, name="chat-show"),
    path("c/<uuid:conversation_id>/rename", views.conversation_rename, name="conversation-rename"),
    path("c/<uuid:conversation_id>/delete", views.conversation_delete, name="conversation-delete"),
    path("render/blocks", views_render.render_blocks, name="render-blocks"),
    path("analytics/", views.analytics_page, name="analytics"),
    # find and take out (search_views.py), share a live answer (share_views.py)
    path("search/", search_views.search, name="search"),
    path("c/<uuid:conversation_id>/export.<str:fmt>", search_views.export, name="conversation-export"),
    path("c/<uuid:conversation_id>/shares", share_views.share_create, name="share-create"),
    path("c/<uuid:conversation_id>/shares/<uuid:share_id>/revoke", share_views.share_revoke, name="share-revoke"),
    path("s/<str:token>/", share_views.shared, name="shared"),
    path("s/<str:token>/turns/<uuid:request_id>/", share_views.shared_turn, name="shared-turn"),
    path("s/<str:token>/render/blocks", views_render.shared_render_blocks, name="shared-render-blocks"),
]
