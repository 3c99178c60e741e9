-- rag_bm25 0.3: the best lexemes of a bulk load's chunks in one pass (rag_service.db.bulk_keywords), a window
-- function over the chunks in load order: rag_bulk_best_lexemes(...) OVER (ORDER BY seq)
CREATE FUNCTION rag_bulk_best_lexemes(stored tsvector, prefix text, content text, config regconfig, k1 float8,
                                      b float8, keyword_count int4, derive bool)
RETURNS text[] AS 'MODULE_PATHNAME', 'rag_bulk_best_lexemes' LANGUAGE C WINDOW PARALLEL RESTRICTED;
