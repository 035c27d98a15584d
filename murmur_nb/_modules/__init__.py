"""Module host: modproto v1 modules run as sandboxed subprocesses."""
