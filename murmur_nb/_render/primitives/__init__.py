"""One renderer per presentation primitive; :mod:`..fallback` picks which."""
