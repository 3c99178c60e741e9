-- rag_bm25 0.2: rag_bm25_topk leaves out the chunk ids it is given (tombstones of rag_service.db.packed_postings)
CREATE FUNCTION rag_bm25_topk(postings bytea[], idf float8[], k1 float8, b float8, avgdl float8, k int4, max_id int4,
                              skip int4[])
RETURNS TABLE(chunk_id int8, score float8) AS 'MODULE_PATHNAME', 'rag_bm25_topk' LANGUAGE C STRICT PARALLEL SAFE;
