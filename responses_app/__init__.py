# The core's and the delivery's modules run compiled when build/native holds a current build (native.py).
from . import native

native.install()
