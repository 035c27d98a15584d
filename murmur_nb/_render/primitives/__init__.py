"""One renderer per presentation primitive; :mod:`murmur_nb._render.fallback` picks which."""
