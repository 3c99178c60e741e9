# The HTTP API (`rag serve`) in a container; docker-compose.yml runs it next to PostgreSQL + pgvector.
#   docker compose up -d --build      then   curl http://127.0.0.1:8000/readyz
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false \
    RAG_DATA_DIR=/data

WORKDIR /app
# CPU torch first, pinned as in the Makefile: a plain `torch` requirement would pull a multi-GB CUDA build
RUN pip install "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md alembic.ini ./
# the migrations ship inside the package (rag_service/migrations); alembic.ini names them from here
COPY rag_service ./rag_service
RUN pip install -e ".[server]"

RUN useradd --create-home --uid 10001 rag && mkdir -p /data && chown rag /data
USER rag
VOLUME ["/data"]
EXPOSE 8000

HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2).status != 200)"

# migrate (idempotent), then serve on every interface of the container
CMD ["sh", "-c", "rag db upgrade && exec rag serve --host 0.0.0.0 --port 8000"]
