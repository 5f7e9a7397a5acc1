"""The HTTP edge, by what it serves: pages (the conversation list, the chat page and its actions,
analytics), live_blocks (the live answer's blocks rendered for the script), versions (a turn's
versions), share_links (read-only links and the shared pages), search_export (search and the export
downloads), export (the export's Markdown and JSON), jsonapi (the JSON API) and frontend_streams
(AG-UI and the AI SDK's streams). URLs are in responses_app/urls.py.

May import anything of the app below it; nothing imports it but the URLs, the template tags and the
management commands."""
