"""The HTTP edge, by what it serves: pages (the conversation list, the chat page and its actions),
conversation_menu (the sidebar, pin, archive and undo), attachment_files (a turn's attachments,
to who may see it), analytics_view (the staff analytics page), turns (a turn as the pages show it:
its badge, words and context), live_blocks (a live answer's blocks drawn for the page's script),
versions (a turn's versions), share_links (read-only links and the shared pages), search_export (search and the export
downloads), export (the export's Markdown and JSON), jsonapi (the JSON API), frontend_streams
(AG-UI and the AI SDK's streams) and charts (the analytics page's charts). The URLs are
responses_app/urls.py; the template tags register what turns and charts decide.

May import anything of the app below it (tests/test_architecture.py: LAYERS); only the wiring
(URLs, template tags) imports it."""
