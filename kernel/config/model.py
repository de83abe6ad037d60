"""``config.toml`` as one model: :class:`Config`, whose fields are the sections.

Each field not marked internal is the table of its name. It is read as its annotation
says (:func:`kernel.config.readers.read_table`: a section model, an optional one (absent:
None), sections by name), or by the :class:`~kernel.config.readers.Reader` its annotation
carries where the model alone does not say it. The rules spanning sections are the
model's validators (:mod:`kernel.config.checks`). The shape of the file
(:mod:`kernel.config.tree`), its unknown-key warnings and SelfOps' allowed keys are
derived from these fields: a new section is one :class:`~kernel.config.schema.Section`
model and one field here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Self

from pydantic import BaseModel, Field, ValidationInfo, model_validator

from kernel.config import checks, readers
from kernel.config.backup import BACKUPS_FOLDER, BackupConfig
from kernel.config.channels import ChannelsConfig
from kernel.config.cli import CLIConfig
from kernel.config.gateway import GatewayConfig
from kernel.config.general import (
    BudgetConfig,
    CronConfig,
    GeneralConfig,
    TelegramConfig,
    ToolPolicy,
)
from kernel.config.mcp import MCPServerConfig, MCPSettings
from kernel.config.memory import MemoryConfig
from kernel.config.prompts import FeaturesConfig, PromptsConfig
from kernel.config.providers import ProviderConfig, TitlesConfig
from kernel.config.readers import Load, Reader
from kernel.config.routing import RoutingConfig
from kernel.config.schema import is_toml, marker
from kernel.config.voice import SttConfig, TtsConfig
from kernel.config.web import AgentsConfig, BrowserConfig, WebConfig

RUNTIME_FILE = "runtime.toml"
_INTERNAL: Any = {"toml": False}  # a field Kernel sets, not a table of the file


class Config(BaseModel):
    """The configuration in effect (``data/runtime.toml`` over ``config.toml``, the
    environment's overrides applied): :func:`kernel.config.load_config` builds it."""

    path: Path = Field(Path("config.toml"), json_schema_extra=_INTERNAL)  # where config.toml is
    general: Annotated[GeneralConfig, Reader(readers.read_general)] = Field(
        default_factory=GeneralConfig
    )
    telegram: Annotated[TelegramConfig, Reader(readers.read_telegram)] = Field(
        default_factory=TelegramConfig
    )
    providers: Annotated[dict[str, ProviderConfig], Reader(readers.read_providers)] = Field(
        default_factory=dict
    )
    titles: Annotated[TitlesConfig | None, Reader(readers.read_titles)] = None
    cli: Annotated[dict[str, CLIConfig], Reader(readers.read_cli)] = Field(default_factory=dict)
    mcp: Annotated[MCPSettings, Reader(readers.read_mcp)] = Field(default_factory=MCPSettings)
    gateway: Annotated[GatewayConfig, Reader(readers.read_gateway)] = Field(
        default_factory=GatewayConfig
    )
    tools: dict[str, ToolPolicy] = Field(default_factory=dict)
    stt: Annotated[SttConfig | None, Reader(readers.read_stt)] = None  # None: voice refused
    tts: Annotated[TtsConfig | None, Reader(readers.read_tts)] = None  # None: replies as text
    # Variables given to tools and child processes (CLIs, MCP stdio servers): [envs] of
    # config.toml under runtime.toml's. Kept current by kernel.runtime; see child_env().
    envs: Annotated[dict[str, str], Reader(readers.read_envs)] = Field(default_factory=dict)
    channels: Annotated[ChannelsConfig, Reader(readers.read_channels)] = Field(
        default_factory=ChannelsConfig
    )
    cron: CronConfig = Field(default_factory=CronConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    backup: BackupConfig = Field(default_factory=BackupConfig)
    routing: Annotated[RoutingConfig, Reader(readers.read_routing)] = Field(
        default_factory=RoutingConfig
    )
    web: Annotated[WebConfig, Reader(readers.read_web)] = Field(default_factory=WebConfig)
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    browser: BrowserConfig = Field(default_factory=BrowserConfig)
    prompts: Annotated[PromptsConfig, Reader(readers.read_prompts)] = Field(
        default_factory=PromptsConfig
    )
    features: FeaturesConfig = Field(default_factory=FeaturesConfig)
    memory: Annotated[MemoryConfig, Reader(readers.read_memory)] = Field(
        default_factory=MemoryConfig
    )
    # [tts] ffmpeg resolved, kept when spoken replies are off (kernel check).
    ffmpeg: Annotated[str, Reader(readers.read_ffmpeg, table="tts")] = Field(
        "", json_schema_extra=_INTERNAL
    )
    warnings: list[str] = Field(default_factory=list, json_schema_extra=_INTERNAL)
    # The environment this was loaded with, so a runtime change re-validates the same way.
    source_env: dict[str, str] = Field(
        default_factory=dict, json_schema_extra=_INTERNAL, repr=False
    )

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any, info: ValidationInfo) -> Any:
        """Given the file's tables (with a :class:`Load` as the context), each field's
        value read from its table; given values (a copy), those."""
        load = info.context
        if not isinstance(load, Load):
            return data
        values: dict[str, Any] = {"path": load.path, "source_env": dict(load.env)}
        for name, info_ in cls.model_fields.items():
            reader = marker(info_, Reader)
            if reader is not None:
                values[name] = reader.read(data.get(reader.table or name), load)
            elif is_toml(info_):
                values[name] = readers.read_table(info_.annotation, data.get(name), name, load)
        values["warnings"] = load.warnings
        return values

    @model_validator(mode="after")
    def _across(self) -> Self:
        """The rules between sections (each refusal names the key and the fix)."""
        checks.check_default_provider(self.general, self.providers)
        checks.check_model_aliases(self.gateway, self.providers)
        checks.check_approvals(self.cli, self.gateway, self.mcp)
        off = [p.name for p in self.tools.values() if not p.enabled]
        self.general.disabled_tools += [n for n in off if n not in self.general.disabled_tools]
        checks.check_routing(self.routing, self.providers, self.general)
        checks.resolve_embeddings(self.memory, self.providers)
        self.warnings += checks.channel_warnings(self.channels, self.cron)
        return self

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    @property
    def data_dir(self) -> Path:
        return self.general.data_dir

    @property
    def db_path(self) -> Path:
        return self.general.data_dir / "kernel.db"

    @property
    def backups_dir(self) -> Path:
        """``[backup] dir``: where backups (by hand and daily) and the pre-upgrade
        snapshots go; empty, data/backups; a relative path is under the data folder."""
        chosen = self.backup.dir.strip()
        if not chosen:
            return self.general.data_dir / BACKUPS_FOLDER
        path = Path(chosen).expanduser()
        return path if path.is_absolute() else self.general.data_dir / path

    @property
    def runtime_path(self) -> Path:
        return self.general.data_dir / RUNTIME_FILE

    @property
    def enabled_providers(self) -> dict[str, ProviderConfig]:
        return {n: p for n, p in self.providers.items() if p.enabled}

    @property
    def mcp_servers(self) -> list[MCPServerConfig]:
        """``[[mcp.servers]]``: the servers to connect (those with an unset ``${VAR}``
        left out)."""
        return self.mcp.servers
