-- rag_bm25 0.3: the best lexemes of a bulk load's chunks in one pass (rag_service.db.bulk_keywords), a window
-- function over the chunks in load order: rag_bulk_best_lexemes(stored, text_vector, ...) OVER (ORDER BY seq)
CREATE FUNCTION rag_bulk_best_lexemes(stored tsvector, text_vector tsvector, k1 float8, b float8, keyword_count int4)
RETURNS text[] AS 'MODULE_PATHNAME', 'rag_bulk_best_lexemes' LANGUAGE C WINDOW PARALLEL RESTRICTED;
