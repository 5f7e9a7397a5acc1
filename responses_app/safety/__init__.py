"""The streaming safety policy: checkers (checkers.py), which mode applies (policy.py), and the
gate between the assembler and the viewers (the relay's safety gate). docs/safety.md."""
