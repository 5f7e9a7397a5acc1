"""The viewers: the websocket consumers, one module each, and the viewer protocol they share with
the front-end streams and `api.subscribe` (follow.py):

- request.py: `RequestConsumer`, one tab following one request (/ws/requests/<id>/);
- conversation.py: `ConversationConsumer`, one tab following one conversation's turns;
- guard.py: what both websockets hold to alike (the session, sockets per user, the frame budget,
  bad frames);
- cursor.py and sender.py: what a request socket sends when (the revision its client holds,
  resyncs, the bounded outbox) and the one task that sends it.

Routes are in routing.py. Nothing is imported here, so importing one consumer loads no other.
"""
