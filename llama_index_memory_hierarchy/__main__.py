"""``python -m llama_index_memory_hierarchy``: the ``lmh`` command line."""

from llama_index_memory_hierarchy.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
