/*
 * rag_bulk_best_lexemes: the best lexemes of every chunk of a bulk load in one pass (rag_service.db.bulk_keywords).
 *
 * A window function over the staged chunks in load order (OVER (ORDER BY seq)). Chunk k's terms are weighed as
 * rag_service.db.keywords weighs them at write time: against the chunks before it plus itself (df, count and
 * total length), BM25 of a one-word query, best first, ties by lexeme in the database's collation. The running
 * statistics live in one hash table (lexeme -> chunks holding it), so the SQL form's per-lexeme window over every
 * term (tens of millions at 1M chunks), its join and its sorts are not needed. Written by hand: no extension keeps
 * running document frequencies, and the SQL form cost 285 s of a 1M load.
 *
 * Two vectors a chunk: its stored tsvector (search prefix and text: what the statistics count) and its text's
 * (what its keywords weigh), which the caller computes (on parallel workers). Counting the text's terms as the
 * stored vector's less the prefix's is not exact: the parser reads the start of a text differently from the same
 * characters after a newline (a leading "~AlgorithmConfig.callbacks" is one file token alone, a host token after
 * the prefix), and a tag opened in the prefix runs across the newline.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_collation_d.h"
#include "catalog/pg_type_d.h"
#include "common/hashfn.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "tsearch/ts_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"
#include "utils/varlena.h"
#include "windowapi.h"

/* a lexeme of the running statistics: its bytes (owned by the table's context) and the chunks holding it */
typedef struct
{
	const char *str;
	int			len;
}			LexemeKey;

typedef struct
{
	LexemeKey	key;
	int64		chunks;
	uint32		hash;
	char		status;
}			LexemeCount;

#define SH_PREFIX lexcount
#define SH_ELEMENT_TYPE LexemeCount
#define SH_KEY_TYPE LexemeKey
#define SH_KEY key
#define SH_HASH_KEY(tb, k) hash_bytes((const unsigned char *) (k).str, (k).len)
#define SH_EQUAL(tb, a, b) ((a).len == (b).len && memcmp((a).str, (b).str, (a).len) == 0)
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a) ((a)->hash)
#define SH_SCOPE static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

typedef struct
{
	MemoryContext context;
	lexcount_hash *counts;
	int64		chunks;			/* chunks before the current one */
	double		total_length;	/* their summed length (TSV_LENGTH: positions, at least 1 a lexeme) */
}			RunningStatistics;

/* one term of the current chunk's text */
typedef struct
{
	const char *str;
	int			len;
	double		tf;
	double		score;
}			Term;

/* the keyword filter of db.keywords.KEYWORD_TERMS_SQL: 2 to 40 characters, digits at most half, a letter */
static bool
worth_a_keyword(const char *str, int len)
{
	int			chars = 0,
				digits = 0;
	bool		ascii_letter = false;

	for (const char *p = str, *end = str + len; p < end; p += pg_mblen(p))
	{
		chars++;
		if (*p >= '0' && *p <= '9')
			digits++;
		else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))
			ascii_letter = true;
	}
	if (chars < 2 || chars > 40 || 2 * digits > chars)
		return false;
	if (ascii_letter)			/* a letter in every locale and provider */
		return true;
	/* other letters as the SQL form's regular expression sees them (the database's collation) */
	return DatumGetBool(DirectFunctionCall2Coll(textregexeq, DEFAULT_COLLATION_OID,
												PointerGetDatum(cstring_to_text_with_len(str, len)),
												PointerGetDatum(cstring_to_text("[[:alpha:]]"))));
}

static inline int
positions(TSVector tsv, WordEntry *entry)
{
	return POSDATALEN(tsv, entry);
}

/* the text's terms: its lexemes worth a keyword, tf their positions (at least 1) */
static int
own_terms(TSVector text_vector, Term *terms)
{
	WordEntry  *entries = ARRPTR(text_vector);
	int			found = 0;

	for (int i = 0; i < text_vector->size; i++)
	{
		const char *str = STRPTR(text_vector) + entries[i].pos;

		if (worth_a_keyword(str, entries[i].len))
			terms[found++] = (Term) {str, entries[i].len, (double) Max(positions(text_vector, &entries[i]), 1), 0.0};
	}
	return found;
}

/* best first: the higher score, then the lexeme first in the database's collation (ORDER BY score DESC, lexeme) */
static int
best_first(const void *a, const void *b)
{
	const Term *x = (const Term *) a,
			   *y = (const Term *) b;

	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return varstr_cmp(x->str, x->len, y->str, y->len, DEFAULT_COLLATION_OID);
}

PG_FUNCTION_INFO_V1(rag_bulk_best_lexemes);

/*
 * rag_bulk_best_lexemes(stored tsvector, text_vector tsvector, k1 float8, b float8, keyword_count int4) -> text[]
 * (NULL: no term), a window function over the chunks in load order
 */
Datum
rag_bulk_best_lexemes(PG_FUNCTION_ARGS)
{
	WindowObject window = PG_WINDOW_OBJECT();
	RunningStatistics **slot = WinGetPartitionLocalMemory(window, sizeof(RunningStatistics *));
	RunningStatistics *stats = *slot;
	bool		null_stored,
				null_text,
				null_arg;
	Datum		stored_datum = WinGetFuncArgCurrent(window, 0, &null_stored),
				text_datum = WinGetFuncArgCurrent(window, 1, &null_text);
	double		k1 = DatumGetFloat8(WinGetFuncArgCurrent(window, 2, &null_arg)),
				b = DatumGetFloat8(WinGetFuncArgCurrent(window, 3, &null_arg));
	int32		keyword_count = DatumGetInt32(WinGetFuncArgCurrent(window, 4, &null_arg));
	TSVector	stored = null_stored ? NULL : DatumGetTSVector(stored_datum);	/* NULL: a NULL prefix or text */
	int			stored_size = stored ? stored->size : 0;
	WordEntry  *entries = stored ? ARRPTR(stored) : NULL;
	TSVector	text_vector = null_text ? NULL : DatumGetTSVector(text_datum);
	Term	   *terms = palloc(sizeof(Term) * Max(text_vector ? text_vector->size : 0, 1));
	int			found = 0;
	double		len = 0.0,
				n,
				avglen,
				chunk_length = 0.0;
	Datum	   *best;
	ArrayType  *result = NULL;

	if (stats == NULL)
	{
		MemoryContext context = GetMemoryChunkContext(slot);	/* the partition's: the whole pass */

		stats = MemoryContextAllocZero(context, sizeof(RunningStatistics));
		stats->context = context;
		stats->counts = lexcount_create(context, 1 << 16, NULL);
		*slot = stats;
	}
	WinSetMarkPosition(window, WinGetCurrentPosition(window));	/* earlier rows are never read again */
	if (text_vector != NULL && keyword_count > 0)
		found = own_terms(text_vector, terms);
	for (int i = 0; i < found; i++)
		len += terms[i].tf;
	/* the statistics with the chunk itself counted in (self_count 1), as db.keywords.KEYWORD_STATISTICS_SQL */
	n = (double) (stats->chunks + 1);
	avglen = Max(stats->total_length + 1.0 * len, 1.0) / n;
	for (int i = 0; i < found; i++)
	{
		LexemeKey	key = {terms[i].str, terms[i].len};
		LexemeCount *count = lexcount_lookup(stats->counts, key);
		double		df = (double) Max((count ? count->chunks : 0) + 1, 1),
					tf = terms[i].tf;

		/* db.keywords.KEYWORD_SCORE_SQL, operation by operation */
		terms[i].score = log(1.0 + (n - df + 0.5) / (df + 0.5)) * tf * (k1 + 1.0)
			/ (tf + k1 * (1.0 - b + b * len / avglen));
	}
	if (found > 0)
	{
		int			kept = Min(found, keyword_count);

		qsort(terms, found, sizeof(Term), best_first);
		best = palloc(sizeof(Datum) * kept);
		for (int i = 0; i < kept; i++)
			best[i] = PointerGetDatum(cstring_to_text_with_len(terms[i].str, terms[i].len));
		result = construct_array_builtin(best, kept, TEXTOID);
	}
	/* then the chunk joins the statistics: every lexeme of its stored vector, its length */
	for (int i = 0; i < stored_size; i++)
	{
		LexemeKey	key = {STRPTR(stored) + entries[i].pos, entries[i].len};
		bool		known;
		LexemeCount *count = lexcount_insert(stats->counts, key, &known);

		if (!known)
		{
			char	   *owned = MemoryContextAlloc(stats->context, key.len + 1);

			memcpy(owned, key.str, key.len);
			count->key.str = owned;
			count->chunks = 0;
		}
		count->chunks++;
		chunk_length += Max(positions(stored, &entries[i]), 1);
	}
	stats->chunks++;
	stats->total_length += chunk_length;
	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_ARRAYTYPE_P(result);
}
