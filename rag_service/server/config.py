"""The HTTP server's settings, from the environment (prefix ``RAG_API_``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, DotEnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from rag_service.envfile import usable
from rag_service.errors import ConfigurationError
from rag_service.server.schemas import MAX_QUERY_CHARS


class ServerConfig(BaseSettings):
    """``RAG_API_TOKEN`` guards writes, ``RAG_API_READ_TOKEN`` (optional) reads; limits bound input."""

    model_config = SettingsConfigDict(env_prefix="RAG_API_", env_file=".env", extra="ignore")

    token: SecretStr | None = Field(default=None, description="bearer token for writes; unset: reads only")
    read_token: SecretStr | None = Field(default=None, description="bearer token for reads; unset: open reads")
    cors_origins: list[str] = Field(default_factory=list, description="allowed origins (JSON list); empty: no CORS")
    allowed_hosts: str = Field(
        default="",
        description="Host names answered besides localhost and --host (comma-separated, *.example.com for "
        "subdomains, * for any); server/hosts.py has the default",
    )
    threads: int = Field(default=8, ge=1, le=256, description="threads for blocking calls (retrieve, DB)")
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024, description="largest JSON request body")
    max_upload_bytes: int = Field(default=50 * 1024 * 1024, ge=1024, description="largest multipart upload")
    # the library reads 8,000 characters and searches a long one by its question (retrieve/focus.py): a pasted
    # traceback with its question is 1,000-6,000 of them, and 8,000 cost one retrieve() at most ~75 ms more
    max_query_chars: int = Field(
        default=MAX_QUERY_CHARS,
        ge=1,
        le=MAX_QUERY_CHARS,
        description="longest query text of POST /api/rag/retrieve (422 beyond)",
    )
    # per-call overrides of POST /api/rag/retrieve past these are refused (422); a stored preset keeps its own values
    max_chunks: int = Field(default=50, ge=1, le=1000, description="largest max_chunks a request may ask for")
    max_candidate_k: int = Field(default=200, ge=1, le=1000, description="largest candidate_k a request may ask for")
    max_tokens: int = Field(default=16_000, ge=1, le=1_000_000, description="largest max_tokens a request may ask for")
    max_documents: int = Field(default=1000, ge=1, description="most documents in one POST /api/documents")
    job_threshold_chars: int = Field(
        default=100_000,
        ge=0,
        description="a POST /api/documents whose texts total more characters is indexed as a job (202); "
        "100k characters are ~250 chunks, ~6 s of embedding on 2 CPU cores",
    )
    retry_after_s: int = Field(default=5, ge=1, description="Retry-After of a 503 when no better hint exists")
    header_timeout_s: float = Field(
        default=10.0, gt=0, le=600, description="seconds a connection has to send each request head (408 and closed)"
    )
    max_connections: int = Field(
        default=500, ge=1, description="open connections before requests get 503 (uvicorn's limit_concurrency)"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The environment, then ``.env`` without what a committed one may not set (``envfile``)."""
        return init_settings, env_settings, _GuardedDotEnv(settings_cls), file_secret_settings

    @field_validator("token", "read_token")
    @classmethod
    def _sendable(cls, value: SecretStr | None) -> SecretStr | None:
        """Refuse a token no Authorization header can carry (every request would get 401); empty means unset."""
        problem = token_problem(value.get_secret_value()) if value is not None else None
        if problem is not None:
            raise ValueError(problem)
        return value

    @property
    def write_token(self) -> str | None:
        """The write token's value, or None when writes are disabled."""
        return self.token.get_secret_value() if self.token and self.token.get_secret_value() else None

    @property
    def reads_token(self) -> str | None:
        """The read token's value, or None when reads are open."""
        value = self.read_token.get_secret_value() if self.read_token else ""
        return value or None


class _GuardedDotEnv(DotEnvSettingsSource):
    """``.env``'s values, without the settings ``envfile`` guards when git tracks the file."""

    def _read_env_file(self, file_path: Path) -> Mapping[str, str | None]:
        return usable(super()._read_env_file(file_path), file_path)


def token_problem(token: str) -> str | None:
    """Why no client can send ``token`` in an ``Authorization`` header (HTTP strips a value's outer whitespace and
    refuses control characters); None when one can. A trailing newline is what a secret written from a file gets."""
    if not token:
        return None
    if not token.strip():
        return "is only whitespace, which no Authorization header can carry; set a real token, or unset it"
    if token != token.strip():
        end = "ends" if token[-1].isspace() else "starts"
        if token[-1] in "\r\n":  # `echo` or a file's last line
            return "ends with a newline, which no Authorization header can carry; remove it (printf '%s', not echo)"
        return f"{end} with whitespace, which no Authorization header can carry; remove it"
    if any(ord(c) < 32 or ord(c) == 127 for c in token):
        return "holds a control character (a newline?), which no Authorization header can carry; remove it"
    return None


def load_server_config(**overrides: object) -> ServerConfig:
    """Read the server settings; a bad value becomes a one-line ConfigurationError."""
    from pydantic import ValidationError

    try:
        return ServerConfig(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "RAG_API_" + str(first["loc"][0]).upper() if first["loc"] else "server settings"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigurationError(f"{name} {message}" if name in _TOKENS else f"{name}: {message}") from None


_TOKENS = ("RAG_API_TOKEN", "RAG_API_READ_TOKEN")
