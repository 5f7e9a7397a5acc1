"""The app's Channels consumers, one module each, and the parts the websocket ones share:

- request.py: `RequestConsumer`, one tab following one request (/ws/requests/<id>/);
- conversation.py: `ConversationConsumer`, one tab following one conversation's turns;
- runner.py: `RunnerConsumer`, on the `relay-runner` channel, which starts and stops runners;
- guard.py: what both websockets hold to alike (the session, sockets per user, the frame budget,
  bad frames);
- cursor.py and writer.py: what a request socket sends when (the revision its client holds,
  resyncs, the bounded outbox) and the one task that sends it.

Routes are in routing.py. Nothing is imported here, so importing one consumer (the worker imports
the runner's) loads no other.
"""
