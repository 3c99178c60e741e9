#!/usr/bin/env bash
# Build and install rag_bm25 into the PostgreSQL tree of PG_CONFIG (make bm25ext: the embedded server's).
# pg_config's CFLAGS name two clang-only warnings the embedded tree was built with; gcc rejects them.
set -euo pipefail
pg_config=${1:?usage: build.sh PG_CONFIG}
here=$(cd "$(dirname "$0")" && pwd)
flags=$("$pg_config" --cflags | sed -e 's/-Wmissing-variable-declarations//g' -e 's/-Wcast-function-type-strict//g')
for target in all install clean; do
	make --no-print-directory -s -C "$here" PG_CONFIG="$pg_config" CFLAGS="$flags" "$target" >/dev/null
done
echo "rag_bm25 installed into $("$pg_config" --pkglibdir)"
