"""The parts of a ``Container`` that live on PostgreSQL: explicit memories (with the embedder
and the review cursors), the erasure log, the event outbox and insights.

=======================  ===============================================================
part                     built from
=======================  ===============================================================
``database_url``         ``ENGRAM_DATABASE_URL`` with the credentials of the Secrets Manager
                         secret ``ENGRAM_DATABASE_SECRET_ARN`` when set; without a URL the
                         embedded PostgreSQL under ``ENGRAM_DATA_DIR`` (migrated on first use)
``database``             ``engram.adapters.postgres.pool.Database`` (lazy pool); with the
                         secret every new connection takes the cached secret's credentials,
                         and a refused login reads it again (``DatabaseLogin``)
``memory_store``         ``PostgresMemoryStore``: the unit of work over memories, personas,
                         team settings, review actions, erasures and the outbox
``embedder``             WordLlama (offline) when ``ENGRAM_EMBEDDER=local``, MiniLM (offline,
                         numpy) when ``minilm``, Bedrock Titan when ``bedrock``, else none
``cursors``              ``CursorSigner`` (review cursors): ``ENGRAM_CURSOR_KEY``, else the
                         secret ``ENGRAM_CURSOR_KEY_SECRET_ARN``, else the key file
                         ``<ENGRAM_DATA_DIR>/keys/cursor-key`` (local only)
``memories``             ``MemoryService`` on the store, the embedder and the cursors
``erasure_log``          ``PostgresErasureLog`` (who was erased when; read by maintenance)
``outbox``               ``PostgresOutbox`` (the relay's side of the event outbox)
``insights``             ``InsightsService`` on ``PostgresInsights`` (``ENGRAM_INSIGHTS_MIN_USERS``)
=======================  ===============================================================
"""

# Heavy or optional dependencies are imported where used, so importing this module is cheap.

from __future__ import annotations

from typing import TYPE_CHECKING

from engram.bootstrap.parts import Parts, part

if TYPE_CHECKING:
    from engram.adapters.postgres.pool import Database
    from engram.adapters.postgres.store import PostgresMemoryStore
    from engram.events.ports import Outbox
    from engram.insights.service import InsightsService
    from engram.maintenance.ports import ErasureLog
    from engram.memories.cursors import CursorSigner
    from engram.memories.ports import Embedder
    from engram.memories.service import MemoryService


class PostgresParts(Parts):
    """Explicit memories and the other PostgreSQL-backed parts."""

    @part
    def database_url(self) -> str:
        s = self.settings
        if s.database_url:
            if not s.database_secret_arn:
                return s.database_url
            from engram.adapters.secrets import database_url_from_secret

            return database_url_from_secret(
                s.database_url, s.database_secret_arn, self._secret_client()
            )
        from engram.adapters.embedded import database_url

        url = database_url(s)
        if self._migrate is not False:
            from engram.adapters.postgres.migrate import apply_migrations

            apply_migrations(url, embedding_dimensions=s.embedding_dimensions)
        return url

    @part
    def database(self) -> Database:
        from engram.adapters.postgres.pool import Database

        s = self.settings
        if "database_url" in self._given or not (s.database_url and s.database_secret_arn):
            return Database.from_settings(s, self.database_url)
        from engram.adapters.secrets import DatabaseLogin, Secret

        secret = Secret(s.database_secret_arn, self._secret_client(), max_age_s=s.secret_max_age_s)
        login = DatabaseLogin(s.database_url, secret)
        return Database.from_settings(s, login.conninfo, refreshed=login.refreshed)

    @part
    def memory_store(self) -> PostgresMemoryStore:
        """The PostgreSQL unit of work under ``memories`` (also what the maintenance job's
        retention and erasure backstop run on)."""
        from engram.adapters.postgres.store import PostgresMemoryStore

        return PostgresMemoryStore(self.database, self.clock)

    @part
    def embedder(self) -> Embedder | None:
        if self.settings.embedder == "local":
            from engram.adapters.local_embedder import WordLlamaEmbedder

            return WordLlamaEmbedder()
        if self.settings.embedder == "minilm":
            from engram.adapters.minilm_embedder import MiniLMEmbedder

            return MiniLMEmbedder()
        if self.settings.embedder != "bedrock":
            return None
        from engram.adapters.bedrock_embedder import BedrockTitanEmbedder

        return BedrockTitanEmbedder.from_settings(self.settings)

    @part
    def cursors(self) -> CursorSigner:
        """Review cursors signed with the deployment's key, so every process accepts the
        cursors of the others."""
        from engram.memories.cursors import CursorSigner

        s = self.settings
        if s.cursor_key is not None:
            key = s.cursor_key.get_secret_value().encode("utf-8")
        elif s.cursor_key_secret_arn:
            from engram.adapters.secrets import secret_string

            key = secret_string(s.cursor_key_secret_arn, self._secret_client()).encode()
        else:
            from engram.adapters.keyfiles import cursor_key

            key = cursor_key(s.data_dir)
        return CursorSigner(key)

    @part
    def memories(self) -> MemoryService:
        from engram.memories.service import MemoryService

        return MemoryService(
            self.memory_store,
            embedder=self.embedder,
            settings=self.settings,
            clock=self.clock,
            cursors=self.cursors,
        )

    @part
    def erasure_log(self) -> ErasureLog:
        from engram.adapters.postgres.erasures import PostgresErasureLog

        return PostgresErasureLog(self.database, clock=self.clock)

    @part
    def outbox(self) -> Outbox:
        from engram.adapters.postgres.outbox import PostgresOutbox

        return PostgresOutbox(self.database)

    @part
    def insights(self) -> InsightsService:
        from engram.adapters.postgres.insights import PostgresInsights
        from engram.insights.service import InsightsService

        return InsightsService(
            PostgresInsights(self.database), min_users=self.settings.insights_min_users
        )

    def ping_postgres(self) -> bool:
        with self.database.pool.connection(timeout=1.0) as conn:
            conn.execute("SELECT 1")
        return True
