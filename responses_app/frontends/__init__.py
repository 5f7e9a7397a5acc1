"""Front-end protocols spoken from the relay's view: AG-UI (agui.py) and the Vercel AI SDK's UI
message stream (aisdk.py), both translated by one diff engine (told.py).

Pure: no Django, no I/O, no clock. The Django glue is responses_app/web/frontend_streams.py.
"""
