"""Store interfaces (``base``) and their backends (record, keyword, vector, graph, files)."""
