"""Operations on a whole deployment (every user), above the tiers and the lifecycle.

* :mod:`.verify`: ``verify_indexes``, the full consistency check of the derived indexes;
* :mod:`.rebuild`: ``rebuild_indexes`` (``lmh reindex``), every derived index rebuilt from the records;
* :mod:`.migrate`: ``migrate`` (``lmh migrate``), an embedded folder moved to a server deployment.
"""
