"""The module checker and the ``murmur-nb`` command line."""
