"""DELETE /api/documents and a running ingest or reindex of the same collection exclude each other; a run that
starts during a delete waits for it."""

from __future__ import annotations

import threading
import uuid

from rag_service.db.locks import lock_for_edit, reindex_lock
from tests.server.conftest import WRITE_TOKEN, LiveServer

TEXT = "# Kites\n\nA kite flies on the wind when the line holds it against the moving air above the field."


def _documents(live: LiveServer, collection: str) -> int:
    with live.client() as client:
        names = {c["name"]: c for c in client.get("/api/collections").json()["collections"]}
    return int(names[collection]["documents"]) if collection in names else 0


def test_delete_is_refused_while_a_reindex_holds_the_collection(live: LiveServer) -> None:
    collection = f"lock-{uuid.uuid4().hex[:8]}"
    params = {"source": "kites.md", "collection": collection}
    with live.client(WRITE_TOKEN) as client:
        documents = [{"source": "kites.md", "text": TEXT}]
        added = client.post("/api/documents", json={"collection": collection, "documents": documents})
        assert added.status_code == 200, added.text
        with reindex_lock(live.service.db.engine, collection):  # what every ingest and reindex holds
            refused = client.delete("/api/documents", params=params)
            assert refused.status_code == 409, refused.text
            error = refused.json()["error"]
            assert error["code"] == "reindex_in_progress"
            assert error["message"] == (
                f"collection {collection!r} is being indexed (an ingest or reindex is running); wait for it to "
                "finish and try again"
            )
            assert _documents(live, collection) == 1
            job = client.post("/api/documents/reindex-all", json={"collection": collection})  # a CLI run, say
            assert job.status_code == 409 and job.json()["error"]["code"] == "reindex_in_progress", job.text
            assert "another ingest or reindex" in job.json()["error"]["message"]
        gone = client.delete("/api/documents", params=params)
        assert gone.status_code == 200 and gone.json()["deleted"] == 1, gone.text
        assert _documents(live, collection) == 0


def test_deletes_do_not_exclude_each_other_and_an_ingest_waits_for_them(live: LiveServer) -> None:
    collection = f"lock-{uuid.uuid4().hex[:8]}"
    with live.client(WRITE_TOKEN) as client:
        documents = [{"source": f"kites{i}.md", "text": TEXT} for i in range(2)]
        assert client.post("/api/documents", json={"collection": collection, "documents": documents}).is_success
        with live.service.db.transaction() as session:  # another delete, still open
            lock_for_edit(session, collection)
            gone = client.delete("/api/documents", params={"source": "kites0.md", "collection": collection})
            assert gone.status_code == 200, gone.text
            ending = threading.Timer(0.5, session.commit)  # the open delete ends a moment later
            ending.start()
            started = client.post("/api/documents", json={"collection": collection, "documents": documents[:1]})
            ending.join()
            assert started.status_code == 200, started.text  # it waited instead of failing (a reindex-all job did)
        assert _documents(live, collection) == 2
