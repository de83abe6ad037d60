"""The composition root: build the store, tools, agent and every plugin's parts from a
Config, and start and stop them in one written-down order (:meth:`Kernel.start`,
:meth:`Kernel.serve`, :meth:`Kernel.stop`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from kernel.agent.agent import SKILLS_FOLDER, Agent
from kernel.agent.titles import TitleMaker
from kernel.audit import AuditLog, kinds
from kernel.audit.anchor import ANCHOR_FILE
from kernel.audit.key import key_path
from kernel.channels.deps import ChannelDeps
from kernel.config import Config
from kernel.config.privilege import PrivilegeGate, stored_guarded
from kernel.core.backoff import Backoff, Retrying
from kernel.core.clock import Clock, SystemClock, sleep_unless
from kernel.core.delivery import ChannelRegistry, Target
from kernel.core.errors import StartupError, StoreError
from kernel.core.i18n import set_language, t
from kernel.core.plugin import ChannelParts, Frontend
from kernel.core.provider import Provider, Sleep
from kernel.core.status import StatusBoard
from kernel.core.tasks import TaskSet
from kernel.core.usage import Usage
from kernel.cron.runner import JobRunner
from kernel.cron.scheduler import CronScheduler
from kernel.delegate.approvals import Approvals
from kernel.delegate.delegator import Delegator
from kernel.gateway.deps import GatewayDeps
from kernel.mcp import MCPManager
from kernel.mcp.interact import agent_sampler
from kernel.memory.memories import Memories
from kernel.plugins import FrontendDeps, Plugins, ToolDeps, default_plugins
from kernel.providers import titles_provider_config
from kernel.providers.retirement import retirement_notices
from kernel.retention import RetentionJob
from kernel.routing import Health
from kernel.runtime import Runtime
from kernel.selfops import Mutations
from kernel.skills import SkillLibrary
from kernel.spend import CallTag
from kernel.store.artifacts import ArtifactStore
from kernel.store.channels import ChannelStore
from kernel.store.cron import CronStore
from kernel.store.db import Store
from kernel.store.mailbox import Mailbox
from kernel.store.migrations import MigrationFailed
from kernel.store.responses import ResponseStore
from kernel.store.trouble import StorageTrouble, diagnose
from kernel.tools.registry import ToolRegistry
from kernel.workspace import Workspace
from kernel.workspace.archive import Archives
from kernel.workspace.paths import own_code

if TYPE_CHECKING:
    from kernel.backup.schedule import BackupJob
    from kernel.channels.qq import QQChannel
    from kernel.channels.qq_inbound import QQInbound
    from kernel.channels.webhook import WebhookChannel
    from kernel.gateway.api import Router
    from kernel.telegram.deps import TelegramServices

log = logging.getLogger(__name__)


def _migration_refusal(exc: MigrationFailed) -> StartupError:
    """One line naming the migration that failed and the schema the database is back at."""
    return StartupError(
        t(
            "startup.migration_failed",
            number=exc.number,
            name=exc.name,
            detail=exc.detail,
            old=exc.old if exc.old is not None else "?",
            snapshot=exc.snapshot or "-",
        )
    )


class Kernel:
    """The assembled assistant: its core, and every plugin's channels and frontends."""

    # Storage trouble at start: 1 s doubling to 60 s (issue 15), on the Kernel's clock.
    storage_backoff = Backoff(first=1.0, cap=60.0)

    def __init__(
        self,
        config: Config,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Clock | None = None,
        plugins: Plugins | None = None,
        health: Health | None = None,
    ) -> None:
        """``clock``: what cron, token expiry and webhook backoff see as time (tests
        inject one they drive); ``sleep``: provider retry waits; ``plugins``: what
        registers the parts (the built-ins by default); ``health``: the providers'
        circuit breakers (tests give one a monotonic clock they drive)."""
        set_language(config.general.language)  # loading returns it; the assistant speaks it
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.plugins = plugins or default_plugins()
        self.plugins.check_config(config)
        self.store = Store(config.db_path, backups=config.backups_dir)
        self.memories = Memories(self.store, config.data_dir / "cache")
        self.tools = ToolRegistry()
        self.mcp = MCPManager(config, self.tools, self.clock)
        self._sleep = sleep
        self.delegator = Delegator(config)
        self.skills = SkillLibrary(config.base_dir / SKILLS_FOLDER)
        # Issue 23: one audit log, every part records into it; its end also kept outside
        # the database (data/audit.anchor).
        self.audit = AuditLog(self.store, anchor=config.data_dir / ANCHOR_FILE)
        self.audit_key_file = key_path(config.base_dir)  # kernel/audit/key.py
        self.delegator.audit = self.mcp.audit = self.audit
        self.artifacts = ArtifactStore(self.store)  # the files turns made, per session
        self.delegator.artifacts = self.artifacts
        self.agent = Agent(
            config,
            self.store,
            self.tools,
            self._make_provider,
            sleep=sleep,
            memories=self.memories,
            skills=self.skills,
            clock=self.clock.now,
            health=health,
            audit=self.audit,
        )
        self.mcp.sampler = agent_sampler(self.agent)  # MCP sampling: the agent's own model
        # /v1/responses kept for previous_response_id, pruned by retention
        self.responses = ResponseStore(self.store, config.general.retention_days)
        self.retention = RetentionJob(
            config.data_dir,
            config.general.retention_days,
            mailbox=Mailbox(self.store),
            decisions=self.agent.decisions,
            decisions_days=config.routing.decisions_days,
            artifacts=self.artifacts,
            responses=self.responses,
        )
        self.backups = self._backups() if config.backup.enabled else None
        self.runtime = Runtime(config, provider_types=self.plugins.provider_types)
        self.runtime.on_providers_changed(self.agent.selection.providers_changed)
        self.runtime.on_config_changed(self._config_changed)
        # The workspace the sidecar serves: config.toml, the data dir, the audit key and
        # Kernel's own code (the Quickstart's workspace is its checkout) never among it.
        self.workspace = Workspace(
            config.general.default_workspace,
            protected=[config.path, config.data_dir, self.audit_key_file, *own_code()],
            allow_hard_links=config.gateway.allow_hard_links,
        )
        self.archives = Archives(
            self.workspace,
            config.data_dir / "tmp",
            max_bytes=config.gateway.archive_max_bytes,
            max_files=config.gateway.archive_max_files,
        )
        # SelfOps writes beside config.toml, maybe the same folder: one lock for both.
        self.selfops = Mutations(
            config, self.runtime, self.agent, lock=self.workspace.lock, audit=self.audit
        )
        # Running channels report their health here (/healthz) ...
        self.status_board = StatusBoard()
        # ... and every delivery goes through the outbound channels (seed 000's Channel
        # plugins), each built by its plugin.
        self.channel_registry = ChannelRegistry()
        self.agent.tasks.channels = self.channel_registry  # a task's questions reach the owner
        # A coding CLI's permission prompts, answered by the owner (the MCP endpoint's
        # approve tool; the Delegator opens a grant per run that may ask).
        claude = config.cli.get("claude_code")
        self.approvals = Approvals(
            self.store,
            self.agent.asks,
            self.channel_registry,
            timeout=claude.approval_timeout if claude is not None else 600.0,
            audit=self.audit,
        )
        self.delegator.approvals = self.approvals
        # Who may change what can run a program or send a key elsewhere (issue 33): the
        # console only with the owner's confirmation in Telegram.
        self.privilege = PrivilegeGate(
            self.agent.asks, self.channel_registry, lambda: self.config.gateway.confirm_timeout
        )
        self.runtime.privilege = self.privilege
        self.channel_records = ChannelStore(self.store)  # what channels keep across restarts
        self.channel_parts: dict[str, ChannelParts] = {}
        channel_deps = ChannelDeps(
            config,
            self.clock,
            self.store,
            self.agent,
            self.runtime,
            self.channel_registry,
            self.channel_records,
        )
        for name, build in self.plugins.channels.items():
            parts = build(channel_deps)
            self.channel_parts[name] = parts
            self.channel_registry.register(parts.outlet, close=parts.close)
        self.cron = CronScheduler(
            config,
            CronStore(self.store),
            JobRunner(config, self.agent, self.channel_registry, self.clock),
            self.clock,
            self.channel_registry.names,
            audit=self.audit,
        )
        # The budget's warning goes to the owner's chat; a job's own limit is its spec's.
        self.agent.meter.notify = self._tell_owner
        self.agent.meter.job_budget = self._job_budget
        self.frontends: list[Frontend] = []  # started by serve(), stopped first
        self._tasks = TaskSet("kernel")
        self._tool_closers: list[Callable[[], Awaitable[None]]] = []  # what tools started

    @property
    def webhook(self) -> WebhookChannel:
        return cast("WebhookChannel", self.channel_parts["webhook"].outlet)

    @property
    def qq(self) -> QQChannel:
        return cast("QQChannel", self.channel_parts["qq"].outlet)

    @property
    def qq_inbound(self) -> QQInbound:
        """What the sidecar's QQ callback route feeds."""
        return cast("QQInbound", self.channel_parts["qq"].inbound)

    def gateway_deps(self) -> GatewayDeps:
        """What the sidecar's routes are handed (never the whole Kernel)."""
        return GatewayDeps(
            config=self.config,
            agent=self.agent,
            sessions=self.store,
            settings=self.store,
            responses=self.responses,
            runtime=self.runtime,
            workspace=self.workspace,
            archives=self.archives,
            mcp=self.mcp,
            audit=self.audit,
            tools=self.tools,
            status_board=self.status_board,
            cron=self.cron,
            approvals=self.approvals,
            artifacts=self.artifacts,
            skills=self.skills,
            selfops=self.selfops,
            memories=self.memories,
            channel_registry=self.channel_registry,
            channel_parts=self.channel_parts,
            provider_types=self.plugins.provider_types,
            command_parts=self,
        )

    def telegram_services(self) -> TelegramServices:
        """What the Telegram channel is given of Kernel (``kernel/telegram/deps.py``)."""
        from kernel.telegram.deps import TelegramServices  # with the channel, when used

        return TelegramServices(
            config=self.config,
            clock=self.clock,
            agent=self.agent,
            store=self.store,
            memories=self.memories,
            delegator=self.delegator,
            cron=self.cron,
            mcp=self.mcp,
            audit=self.audit,
            artifacts=self.artifacts,
            needs_approval=self.tools.needs_approval,
            channel_registry=self.channel_registry,
            status_board=self.status_board,
        )

    def _telegram(self) -> Frontend:
        """The bot (imported only when Telegram is configured)."""
        from kernel.telegram.channel import TelegramChannel

        return TelegramChannel(self.telegram_services())

    def _gateway(self, routers: Sequence[Router]) -> Frontend:
        """The sidecar serving ``routers``."""
        from kernel.gateway.server import Gateway  # the plugin imported it in a thread

        return Gateway(self.gateway_deps(), routers)

    async def _tell_owner(self, text: str, origin: str = "budget") -> None:
        """A notice for the owner (the budget's warning, a failed backup) in Telegram,
        through its durable outbox. Never waits for a channel still starting: a model
        call is waiting."""
        await self.channel_registry.require("telegram").send_text(Target(origin=origin), text)

    def _backups(self) -> BackupJob:
        """The daily backup and its rotation (issue 40), on Kernel's clock; a failure is
        told to the owner once, like the budget's warning. Imported only when on."""
        from kernel.backup.schedule import BackupJob

        async def notify(text: str) -> None:
            await self._tell_owner(text, "backup")

        return BackupJob(self.config, self.clock, self.store, audit=self.audit, notify=notify)

    def _job_budget(self, job_id: str) -> float | None:
        job = self.cron.jobs.get(job_id)
        return job.spec.budget_daily if job is not None else None

    async def _config_changed(self, keys: list[str], by: str) -> None:
        """A runtime change applied: its keys' names (never values) in the audit."""
        sections = sorted({key.split(".", 1)[0] for key in keys})
        await self.audit.record(kinds.CONFIG_CHANGED, actor=by, sections=sections, keys=keys)

    def _make_provider(self, name: str) -> Provider:
        return self.plugins.create_provider(self.config.providers[name])

    async def start(self) -> None:
        """The core: store, channels, tools, MCP servers, agent, scheduler, retention."""
        trouble = await self._open_store()
        if trouble is not None:
            raise self._storage_refusal(trouble)
        # The audit key, kept outside the data directory (beside config.toml or a systemd
        # credential), before anything is recorded: made at the first start.
        await self.audit.start(self.audit_key_file)
        for parts in self.channel_parts.values():
            if parts.start is not None:
                await parts.start()
        if self.config.titles is not None:
            titles = titles_provider_config(self.config.titles)
            self.agent.titles = TitleMaker(
                lambda: self.plugins.create_provider(titles), self._sleep
            )
        tool_deps = ToolDeps(
            self.config,
            self.tools,
            self.memories,
            self.delegator,
            self.agent.profiles,
            self.cron,
            artifacts=self.artifacts,
            channels=self.channel_registry,
            closers=self._tool_closers,
        )
        for register_tools in self.plugins.tools:
            register_tools(tool_deps)
        self.tools.disable(self.config.general.disabled_tools)
        for policy in self.config.tools.values():
            if policy.approval:
                self.tools.require_approval(policy.name, policy.approval_timeout)
        await self._warn_stored_loaders()
        try:
            await self.mcp.start()
            await self.agent.start()
        except BaseException:
            await self.mcp.stop()  # no stdio child may outlive a failed start
            raise
        if self.config.cron.enabled:
            await self.cron.start()
        self.retention.start()
        if self.backups is not None:
            self.backups.start()
        await self._start_vectors()
        for notice in retirement_notices(self.config, self.clock.now().date()):
            log.warning("%s", notice.describe())
        log.info(
            "kernel started: provider=%s model=%s tools=%d",
            self.agent.selection.provider_name,
            self.agent.selection.model,
            len(self.tools.names()),
        )

    async def _start_vectors(self) -> None:
        """Memory by meaning (issue 39), only when [memory.embeddings] is configured: the
        embeddings client and sqlite-vec load here, never otherwise."""
        cfg = self.config.memory.embeddings
        if cfg is None:
            return
        from kernel.memory.vectors import LEDGER_NAME, VectorIndex

        meter = self.agent.meter

        async def record(usage: Usage, known: bool, retries: int) -> object:
            tag = CallTag("embedding")
            return await meter.record(LEDGER_NAME, cfg.model, usage, tag, retries, known=known)

        vectors = VectorIndex(self.store, cfg, record=record, tz=self.agent.tz)
        await vectors.start()
        self.memories.vectors = vectors

    async def _warn_stored_loaders(self) -> None:
        """Loader and destination variables kept in data/runtime.toml take effect in every
        child: named at start, since a keyless sidecar let anyone set them before."""
        names = stored_guarded(await self.runtime.overlay())
        if names:
            log.warning("%s", t("priv.stored", names=", ".join(names)))

    async def _open_store(self) -> StorageTrouble | None:
        """Open the data directory and the database: None once open, else what stops it."""
        try:
            self.config.data_dir.mkdir(parents=True, exist_ok=True)
            await self.store.start()
        except (OSError, StoreError) as exc:
            trouble = await asyncio.to_thread(diagnose, exc, self.config.db_path.parent)
            if isinstance(exc, MigrationFailed) and exc.snapshot and not trouble.passing:
                raise _migration_refusal(exc) from None  # put back: no wait fixes it
            return trouble
        return None

    def _storage_refusal(self, trouble: StorageTrouble) -> StartupError:
        if trouble.path is not None:  # one database file refuses writes: name it
            return StartupError(t("startup.storage_file", path=trouble.path, detail=trouble.cause))
        path = self.config.data_dir
        return StartupError(t("startup.storage", path=path, detail=trouble.cause))

    async def wait_for_storage(self, stopped: asyncio.Event) -> bool:
        """Open the store; trouble that can pass (a full or read-only data directory) is
        retried with backoff (1 s doubling to 60 s) until the store opens (True) or
        ``stopped`` is set (False). Trouble no wait can fix (the data directory is a
        file) raises StartupError, as :meth:`start` does."""
        retrying = Retrying(self.storage_backoff, self.clock)
        while (trouble := await self._open_store()) is not None:
            if not trouble.passing:
                raise self._storage_refusal(trouble)
            delay = retrying.failed()
            log.warning(
                "storage unavailable (%s) at %s; retrying in %gs",
                trouble.cause,
                self.config.data_dir,
                delay,
            )
            if await sleep_unless(self.clock, delay, stopped):
                return False
        if retrying.failures:
            log.info("storage available at %s", self.config.data_dir)
        return True

    async def serve(self, stopped: asyncio.Event) -> None:
        """The service: the core, then every frontend (Telegram, the sidecar), until
        ``stopped`` is set; then the whole shutdown in order. Storage trouble at start
        is waited out (:meth:`wait_for_storage`); a refusal while starting (a rejected
        token, a port in use) propagates after the shutdown."""
        if not await self.wait_for_storage(stopped):
            log.info("stop signal received while waiting for storage; not started")
            return
        async with self:
            stopping = self._tasks.spawn(stopped.wait(), "stop-signal")
            pending: set[asyncio.Task[Any]] = {stopping}
            deps = FrontendDeps(
                self.config, self.store, self.plugins.routers, self._telegram, self._gateway
            )
            # The others (the sidecar) first, so they accept before Telegram polls; then
            # the ones that may wait long for the network (Telegram), started beside the
            # rest of the service: a stop signal also ends a start-up still waiting.
            waiting = self.plugins.waiting_frontends
            order = sorted(self.plugins.frontends.items(), key=lambda item: item[0] in waiting)
            for name, build in order:
                frontend = await build(deps)
                if frontend is None:
                    continue
                self.frontends.append(frontend)
                if name in waiting:
                    pending.add(self._tasks.spawn(_refusal_of(frontend), f"start-{name}"))
                else:
                    await frontend.start()  # a refusal (a port in use) ends the start-up
            while not stopping.done():
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done - {stopping}:
                    refusal = task.result()
                    if refusal is not None:
                        raise refusal
            log.info("stop signal received; shutting down")

    async def stop(self) -> None:
        """Frontends and the scheduler first, side by side (no new work; in-flight
        requests and replies get their bounded time); then what starts turns from
        channels (QQ messages), the turns themselves (they write their last history;
        cancelling one kills its CLI), any CLI still running, MCP sessions and their
        child processes, the channels' connections, the database last."""
        await self._tasks.close()  # a frontend still waiting to start
        frontends, self.frontends = self.frontends, []
        await asyncio.gather(self.cron.stop(), *(frontend.stop() for frontend in frontends))
        for parts in self.channel_parts.values():
            if parts.stop is not None:
                await parts.stop()
        await self.retention.stop()
        if self.backups is not None:
            await self.backups.stop()
        await self.agent.stop()
        for close in self._tool_closers:  # a browser's Chromium (issue 38)
            await close()
        await self.delegator.stop()
        await self.mcp.stop()
        if self.agent.titles is not None:
            await self.agent.titles.aclose()
        await self.channel_registry.aclose()
        await self.memories.close()
        vectors, self.memories.vectors = self.memories.vectors, None
        if vectors is not None:
            await vectors.stop()
        await self.audit.close()
        await self.store.close()
        log.info("kernel stopped")

    async def __aenter__(self) -> Kernel:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def _refusal_of(frontend: Frontend) -> Exception | None:
    """Start ``frontend``; what it raised is returned, for serve() to raise in its place."""
    try:
        await frontend.start()
    except Exception as exc:
        return exc
    return None
