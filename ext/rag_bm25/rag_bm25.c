/*
 * rag_bm25: an exact BM25 top k over packed postings, scored inside the server: the keyword arm of large
 * collections (rag_service.db.packed_postings keeps the lists; scripts/bench_bm25_c.py times it).
 *
 * Each lexeme's postings are one bytea: per posting three LEB128 varints, the gap to the previous chunk
 * id (ids are uint32 offsets, ascending), the term frequency and the chunk's length in lexemes. Every
 * posting is scored as rag_service.db.bm25 scores it, idf * (k1 + 1) * tf / (tf + k1 (1 - b + b len /
 * avgdl)), summed per chunk in a dense array of max_id + 1 floats, and the k best come back, best first
 * (ties by ascending id, as the SQL arm orders them). The aggregate rag_bm25_pack(chunk_id, tf, len ORDER BY
 * chunk_id) builds one such bytea in the server. Written by hand: no BM25 extension is packaged for
 * this PostgreSQL, and the SQL executor costs ~0.3 us a posting, 15x this.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

PG_MODULE_MAGIC;

typedef struct
{
	int32		id;
	float		score;
}			Hit;

/* the heap's root is its weakest hit: the lower score, then the higher id */
static inline bool
weaker(const Hit *a, const Hit *b)
{
	return a->score < b->score || (a->score == b->score && a->id > b->id);
}

static void
sift_down(Hit *heap, int size, int i)
{
	for (;;)
	{
		int			l = 2 * i + 1,
					r = l + 1,
					m = i;
		Hit			t;

		if (l < size && weaker(&heap[l], &heap[m]))
			m = l;
		if (r < size && weaker(&heap[r], &heap[m]))
			m = r;
		if (m == i)
			return;
		t = heap[i];
		heap[i] = heap[m];
		heap[m] = t;
		i = m;
	}
}

static int
best_first(const void *a, const void *b)
{
	return weaker((const Hit *) a, (const Hit *) b) ? 1 : (weaker((const Hit *) b, (const Hit *) a) ? -1 : 0);
}

/* one LEB128 varint at *p, at least 5 bytes before the end (the caller checks) */
static inline uint32
read_varint_fast(const uint8 **p)
{
	const uint8 *q = *p;
	uint32		value = q[0] & 0x7F;

	if (likely(!(q[0] & 0x80)))
	{
		*p = q + 1;
		return value;
	}
	value |= (uint32) (q[1] & 0x7F) << 7;
	if (!(q[1] & 0x80))
	{
		*p = q + 2;
		return value;
	}
	value |= (uint32) (q[2] & 0x7F) << 14;
	if (!(q[2] & 0x80))
	{
		*p = q + 3;
		return value;
	}
	value |= (uint32) (q[3] & 0x7F) << 21;
	if (!(q[3] & 0x80))
	{
		*p = q + 4;
		return value;
	}
	*p = q + 5;
	return value | (uint32) (q[4] & 0x7F) << 28;
}

/* one LEB128 varint at *p, checked against end */
static uint32
read_varint(const uint8 **p, const uint8 *end)
{
	uint32		value = 0;

	for (int shift = 0; *p < end && shift <= 28; shift += 7)
	{
		uint8		byte = *(*p)++;

		value |= (uint32) (byte & 0x7F) << shift;
		if (!(byte & 0x80))
			return value;
	}
	ereport(ERROR, (errmsg("rag_bm25_topk: a posting list is truncated or corrupt")));
	return 0;
}

PG_FUNCTION_INFO_V1(rag_bm25_topk);

/*
 * rag_bm25_topk(postings bytea[], idf float8[], k1, b, avgdl, k, max_id [, skip int4[]]) -> (chunk_id, score);
 * the ids in skip (chunks deleted or rewritten since the lists were packed) are left out (0.2)
 */
Datum
rag_bm25_topk(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ArrayType  *lists_a = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *idf_a = PG_GETARG_ARRAYTYPE_P(1);
	double		k1 = PG_GETARG_FLOAT8(2),
				b = PG_GETARG_FLOAT8(3),
				avgdl = PG_GETARG_FLOAT8(4);
	int32		k = PG_GETARG_INT32(5),
				max_id = PG_GETARG_INT32(6);
	float		base = (float) (k1 * (1.0 - b)),
				slope = (float) (k1 * b / avgdl);
	Datum	   *lists,
			   *idf;
	bool	   *nulls;
	int			n,
				n_idf,
				filled = 0;
	float	   *total;
	Hit		   *heap;

	InitMaterializedSRF(fcinfo, 0);
	deconstruct_array(lists_a, BYTEAOID, -1, false, TYPALIGN_INT, &lists, &nulls, &n);
	deconstruct_array_builtin(idf_a, FLOAT8OID, &idf, &nulls, &n_idf);
	if (n != n_idf)
		ereport(ERROR, (errmsg("rag_bm25_topk: %d posting lists but %d idf values", n, n_idf)));
	if (k <= 0 || n == 0 || max_id < 0)
		return (Datum) 0;
	total = palloc_extended(sizeof(float) * ((Size) max_id + 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);	/* > 1 GB past 2^28 ids */
	for (int t = 0; t < n; t++)
	{
		bytea	   *list = DatumGetByteaPP(lists[t]);
		const uint8 *p = (const uint8 *) VARDATA_ANY(list),
				   *end = p + VARSIZE_ANY_EXHDR(list);
		float		weight = (float) (DatumGetFloat8(idf[t]) * (k1 + 1.0));
		uint32		id = 0;

		while (p < end)
		{
			float		tf,
						len;

			if (end - p >= 15)	/* room for three varints of 5 bytes: no bounds checks */
			{
				id += read_varint_fast(&p);
				tf = (float) read_varint_fast(&p);
				len = (float) read_varint_fast(&p);
			}
			else
			{
				id += read_varint(&p, end);
				tf = (float) read_varint(&p, end);
				len = (float) read_varint(&p, end);
			}
			if (id > (uint32) max_id)
				ereport(ERROR, (errmsg("rag_bm25_topk: chunk %u above max_id %d", id, max_id)));
			total[id] += weight * tf / (tf + base + slope * len);
		}
	}
	if (PG_NARGS() > 7)
	{
		Datum	   *skip;
		bool	   *skip_nulls;
		int			n_skip;

		deconstruct_array_builtin(PG_GETARG_ARRAYTYPE_P(7), INT4OID, &skip, &skip_nulls, &n_skip);
		for (int i = 0; i < n_skip; i++)
		{
			int32		id = DatumGetInt32(skip[i]);

			if (!skip_nulls[i] && id >= 0 && id <= max_id)
				total[id] = 0;	/* scores are positive: a zero is never a hit */
		}
	}
	heap = palloc(sizeof(Hit) * k);
	for (int32 i = 0; i <= max_id; i++)
	{
		Hit			hit = {i, total[i]};

		if (hit.score <= 0)
			continue;
		if (filled < k)
		{
			heap[filled++] = hit;
			if (filled == k)
				for (int j = k / 2 - 1; j >= 0; j--)
					sift_down(heap, k, j);
		}
		else if (weaker(&heap[0], &hit))
		{
			heap[0] = hit;
			sift_down(heap, k, 0);
		}
	}
	qsort(heap, filled, sizeof(Hit), best_first);
	for (int i = 0; i < filled; i++)
	{
		Datum		values[2] = {Int64GetDatum((int64) heap[i].id), Float8GetDatum((double) heap[i].score)};
		bool		isnull[2] = {false, false};

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	return (Datum) 0;
}

typedef struct
{
	StringInfoData bytes;
	int64		last;
}			PackState;

static void
append_varint(StringInfo out, uint32 value)
{
	while (value >= 0x80)
	{
		appendStringInfoCharMacro(out, (char) ((value & 0x7F) | 0x80));
		value >>= 7;
	}
	appendStringInfoCharMacro(out, (char) value);
}

PG_FUNCTION_INFO_V1(rag_bm25_pack_step);

/* rag_bm25_pack's transition: one posting (chunk id, tf, length), the ids ascending */
Datum
rag_bm25_pack_step(PG_FUNCTION_ARGS)
{
	MemoryContext context;
	PackState  *state;
	int64		id;

	if (!AggCheckCallContext(fcinfo, &context))
		ereport(ERROR, (errmsg("rag_bm25_pack_step called outside an aggregate")));
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR, (errmsg("rag_bm25_pack: a posting with a null chunk id, tf or length")));
	if (PG_ARGISNULL(0))
	{
		MemoryContext old = MemoryContextSwitchTo(context);

		state = palloc(sizeof(PackState));
		initStringInfo(&state->bytes);
		state->last = 0;
		MemoryContextSwitchTo(old);
	}
	else
		state = (PackState *) PG_GETARG_POINTER(0);
	id = PG_GETARG_INT64(1);
	if (id < state->last || id > PG_INT32_MAX || (id == state->last && state->bytes.len > 0))
		ereport(ERROR, (errmsg("rag_bm25_pack: chunk ids must ascend from 0 and stay below 2^31 (got %lld after %lld)",
							   (long long) id, (long long) state->last),
						errhint("aggregate with ORDER BY chunk_id")));
	if (PG_GETARG_INT32(2) < 0 || PG_GETARG_INT32(3) < 0)
		ereport(ERROR, (errmsg("rag_bm25_pack: a negative tf or length")));
	append_varint(&state->bytes, (uint32) (id - state->last));
	append_varint(&state->bytes, (uint32) PG_GETARG_INT32(2));
	append_varint(&state->bytes, (uint32) PG_GETARG_INT32(3));
	state->last = id;
	PG_RETURN_POINTER(state);
}

PG_FUNCTION_INFO_V1(rag_bm25_pack_final);

Datum
rag_bm25_pack_final(PG_FUNCTION_ARGS)
{
	PackState  *state = PG_ARGISNULL(0) ? NULL : (PackState *) PG_GETARG_POINTER(0);
	int			len = state ? state->bytes.len : 0;
	bytea	   *out = palloc(VARHDRSZ + len);

	SET_VARSIZE(out, VARHDRSZ + len);
	if (len > 0)
		memcpy(VARDATA(out), state->bytes.data, len);
	PG_RETURN_BYTEA_P(out);
}
