-- rag_bm25: an exact BM25 top k over packed postings (rag_service.db.packed_postings)
CREATE FUNCTION rag_bm25_topk(postings bytea[], idf float8[], k1 float8, b float8, avgdl float8, k int4, max_id int4)
RETURNS TABLE(chunk_id int8, score float8) AS 'MODULE_PATHNAME', 'rag_bm25_topk' LANGUAGE C STRICT PARALLEL SAFE;
CREATE FUNCTION rag_bm25_pack_step(internal, int8, int4, int4) RETURNS internal
AS 'MODULE_PATHNAME', 'rag_bm25_pack_step' LANGUAGE C;
CREATE FUNCTION rag_bm25_pack_final(internal) RETURNS bytea AS 'MODULE_PATHNAME', 'rag_bm25_pack_final' LANGUAGE C;
-- one lexeme's postings as rag_bm25_topk reads them: rag_bm25_pack(chunk_id, tf, len ORDER BY chunk_id)
CREATE AGGREGATE rag_bm25_pack(int8, int4, int4) (SFUNC = rag_bm25_pack_step, STYPE = internal, FINALFUNC = rag_bm25_pack_final);
CREATE FUNCTION rag_bm25_topk(postings bytea[], idf float8[], k1 float8, b float8, avgdl float8, k int4, max_id int4,
                              skip int4[])
RETURNS TABLE(chunk_id int8, score float8) AS 'MODULE_PATHNAME', 'rag_bm25_topk' LANGUAGE C STRICT PARALLEL SAFE;
