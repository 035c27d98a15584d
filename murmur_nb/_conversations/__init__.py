"""Conversation records: the cursor-paginated read API, DataFrames, the writer."""
