"""The streaming core: bytes in, assembled Response and view-model patches out.

Pure and synchronous: no Django, no I/O, no clocks (time is passed in where it matters).
"""
