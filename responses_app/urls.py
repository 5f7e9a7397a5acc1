from __future__ import annotations

from django.urls import path

from .web import (
    analytics_view,
    attachment_files,
    conversation_menu,
    conversation_settings,
    feedback,
    frontend_streams,
    jsonapi,
    live_blocks,
    pages,
    search_export,
    share_links,
    turn_actions,
    versions,
)

app_name = "responses_app"

urlpatterns = [
    path("api/requests", jsonapi.requests_create, name="api-requests"),
    path("api/requests/<uuid:request_id>", jsonapi.requests_detail, name="api-request"),
    path("api/requests/<uuid:request_id>/cancel", jsonapi.requests_cancel, name="api-request-cancel"),
    path("api/requests/<uuid:request_id>/continue", jsonapi.requests_continue, name="api-request-continue"),
    path("api/requests/<uuid:request_id>/approvals/<str:approval_request_id>", jsonapi.requests_approve,
         name="api-request-approve"),
    # front ends: AG-UI and the Vercel AI SDK's useChat (frontend_streams.py, docs/frontends.md)
    path("api/agui/runs", frontend_streams.agui_run, name="agui-run"),
    path("api/agui/requests/<uuid:request_id>/stream", frontend_streams.agui_stream, name="agui-stream"),
    path("api/aisdk/chat", frontend_streams.aisdk_chat, name="aisdk-chat"),
    path("api/aisdk/chat/<str:key>/stream", frontend_streams.aisdk_stream, name="aisdk-stream"),
    # pages
    path("", pages.conversation_list, name="conversations"),
    path("c/new/", pages.conversation_new, name="conversation-new"),
    path("c/<uuid:conversation_id>/", pages.chat, name="chat"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/", pages.chat_turn, name="chat-turn"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/cancel", pages.chat_cancel, name="chat-cancel"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/regenerate", pages.chat_regenerate, name="chat-regenerate"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/continue", turn_actions.chat_continue, name="chat-continue"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/edit", pages.chat_edit, name="chat-edit"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/show", versions.chat_show, name="chat-show"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/feedback", feedback.chat_feedback, name="chat-feedback"),
    path("c/<uuid:conversation_id>/turns/<uuid:request_id>/attachments/<uuid:attachment_id>",
         attachment_files.chat_attachment, name="chat-attachment"),
    path("c/<uuid:conversation_id>/rename", pages.conversation_rename, name="conversation-rename"),
    path("c/<uuid:conversation_id>/delete", pages.conversation_delete, name="conversation-delete"),
    path("c/<uuid:conversation_id>/settings", conversation_settings.conversation_settings,
         name="conversation-settings"),
    path("c/<uuid:conversation_id>/settings/preset", conversation_settings.conversation_preset,
         name="conversation-preset"),
    # the sidebar, pin and archive, undo after Delete (conversation_menu.py)
    path("sidebar/", conversation_menu.sidebar_items, name="sidebar"),
    path("c/<uuid:conversation_id>/pin", conversation_menu.conversation_mark, {"mark": "pinned"},
         name="conversation-pin"),
    path("c/<uuid:conversation_id>/archive", conversation_menu.conversation_mark, {"mark": "archived"},
         name="conversation-archive"),
    path("c/<uuid:conversation_id>/restore", conversation_menu.conversation_restore, name="conversation-restore"),
    path("render/blocks", live_blocks.render_blocks, name="render-blocks"),
    path("analytics/", analytics_view.analytics_page, name="analytics"),
    # find and take out (search_export.py), share a live answer (share_links.py)
    path("search/", search_export.search, name="search"),
    path("c/<uuid:conversation_id>/export.<str:fmt>", search_export.export, name="conversation-export"),
    path("c/<uuid:conversation_id>/shares", share_links.share_create, name="share-create"),
    path("c/<uuid:conversation_id>/shares/<uuid:share_id>/revoke", share_links.share_revoke, name="share-revoke"),
    path("s/<str:token>/", share_links.shared, name="shared"),
    path("s/<str:token>/turns/<uuid:request_id>/", share_links.shared_turn, name="shared-turn"),
    path("s/<str:token>/continue/", share_links.shared_continue, name="shared-continue"),
    path("s/<str:token>/turns/<uuid:request_id>/attachments/<uuid:attachment_id>",
         attachment_files.shared_attachment, name="shared-attachment"),
    path("s/<str:token>/render/blocks", live_blocks.shared_render_blocks, name="shared-render-blocks"),
]
