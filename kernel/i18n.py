"""The one message catalogue for user-facing text. Chinese by default, English available.

Channels and the CLI call :func:`t` with a key; nothing user-facing is written inline.
"""

from __future__ import annotations

from typing import Any

_language = "zh"

CATALOG: dict[str, dict[str, str]] = {
    "zh": {
        # configuration refusals
        "config.not_found": "KERNEL_CONFIG 指向的 {path} 不存在：请修正路径，或取消该环境变量以使用 ./config.toml",
        "config.bad_toml": "{path} 不是合法的 TOML（{detail}）：请修正该行后重试",
        "config.bad_type": "{key} 应为{expected}（当前为 {got!r}）：请在 config.toml 中修正",
        "config.bad_choice": "{key} 只能是 {choices}（当前为 {got!r}）：请在 config.toml 中修正",
        "config.missing_token": "缺少 telegram.token：在 Telegram 找 @BotFather 创建机器人获取 token，然后设置环境变量 KERNEL_TELEGRAM_TOKEN 或 config.toml 的 [telegram] token",
        "config.missing_user": "缺少 telegram.allowed_user：在 Telegram 找 @userinfobot 获取你的数字 user id，然后设置 KERNEL_TELEGRAM_ALLOWED_USER 或 config.toml 的 [telegram] allowed_user",
        "config.unknown_default_provider": "general.default_provider = {name!r} 没有对应的 [providers.{name}] 配置：请添加该 provider 或改成 {available}",
        "config.missing_api_key": "默认 provider 缺少 providers.{name}.api_key：设置环境变量 {env} 或 config.toml 中的 api_key，或把 general.default_provider 改为已配置 key 的 provider",
        "config.missing_max_tokens": "providers.{name}.max_tokens 必填（Claude Messages API 要求）：请按模型能力设置，例如 max_tokens = 16384",
        "config.missing_model": "providers.{name}.default_model 缺失：请设置 default_model 或 models 列表",
        "config.bad_timezone": 'general.timezone = {tz!r} 不是 IANA 时区名：请改成例如 "Asia/Shanghai"',
        "config.needs_stream": '{key} 必须包含 "stream"：Kernel 以流式方式接收每条回复；请换用支持流式输出的 endpoint',
        "config.gateway_no_key": "gateway.host = {host!r} 不是本机回环地址，但未设置 gateway.api_key：请设置 KERNEL_GATEWAY_API_KEY 或改回 127.0.0.1",
        "config.warn_provider_disabled": "provider {name} 没有 api_key，已禁用（设置 {env} 以启用）",
        "config.warn_mcp_env": "MCP server {name} 的 headers 引用的环境变量 {var} 未设置，已跳过该 server",
        "config.warn_unknown_key": "config.toml 中的未知配置项 {key} 已忽略（拼写错误？）",
        # turns and providers
        "turn.cancelled": "已取消",
        "turn.busy": "正在处理上一条消息，请稍后或发送 /cancel",
        "turn.tool_limit": "本条消息的工具调用已达上限（{limit} 次），已停止继续调用工具",
        "provider.error": "模型调用失败：{detail}",
        "provider.no_images": "不支持图片输入（capabilities 不含 attachments）：用 /provider 切换到支持图片的 provider",
        "provider.unavailable": "provider {name} 不可用（未配置或缺少 api_key）；可用：{available}",
        "provider.switched": "已切换到 provider {name}（模型 {model}）",
        "provider.current": "当前 provider：{name}（模型 {model}）；可用：{available}",
        "model.invalid": "模型 {model} 不在 provider {provider} 的 models 列表中；可选：{models}",
        "model.switched": "已切换到模型 {model}",
        "model.current": "当前模型：{model}；可选：{models}",
        # sessions
        "session.new": "已开始新会话",
        "session.none": "还没有历史会话",
        "session.list_header": "历史会话（用 /resume #n 继续）：",
        "session.untitled": "（无标题）",
        "session.bad_ref": "无效的会话序号 {ref}：请先用 /history 查看，再用 /resume #n",
        "session.resumed": "已恢复会话 #{n}：{title}",
        "session.deleted": "已删除 {count} 个会话",
        # console
        "console.welcome": "Kernel 终端对话（provider {provider} / 模型 {model}）。/exit 退出，Ctrl-C 取消当前回复。",
        "console.help": "命令：/new  /history  /resume #n  /provider [name]  /model [name]  /exit",
        "console.unknown_command": "未知命令 {cmd}；{help}",
        "console.tool_call": "⚙ {name}({args})",
        "console.tool_result_ok": "  ✓ {summary}",
        "console.tool_result_err": "  ✗ {summary}",
        "console.error": "✗ {message}",
        "console.bye": "再见",
    },
    "en": {
        "config.not_found": "KERNEL_CONFIG points to {path}, which does not exist: fix the path, or unset it to use ./config.toml",
        "config.bad_toml": "{path} is not valid TOML ({detail}): fix that line and retry",
        "config.bad_type": "{key} must be {expected} (got {got!r}): fix it in config.toml",
        "config.bad_choice": "{key} must be one of {choices} (got {got!r}): fix it in config.toml",
        "config.missing_token": "telegram.token is missing: create a bot with @BotFather, then set KERNEL_TELEGRAM_TOKEN or [telegram] token in config.toml",
        "config.missing_user": "telegram.allowed_user is missing: get your numeric user id from @userinfobot, then set KERNEL_TELEGRAM_ALLOWED_USER or [telegram] allowed_user in config.toml",
        "config.unknown_default_provider": "general.default_provider = {name!r} has no [providers.{name}] section: add it or use one of {available}",
        "config.missing_api_key": "the default provider has no providers.{name}.api_key: set {env} or api_key in config.toml, or point general.default_provider at a provider with a key",
        "config.missing_max_tokens": "providers.{name}.max_tokens is required (the Claude Messages API needs it): set it for your model, e.g. max_tokens = 16384",
        "config.missing_model": "providers.{name}.default_model is missing: set default_model or a models list",
        "config.bad_timezone": 'general.timezone = {tz!r} is not an IANA time zone: use e.g. "Asia/Shanghai"',
        "config.needs_stream": '{key} must include "stream": Kernel streams every reply; use an endpoint that streams',
        "config.gateway_no_key": "gateway.host = {host!r} is not loopback but gateway.api_key is empty: set KERNEL_GATEWAY_API_KEY or bind 127.0.0.1",
        "config.warn_provider_disabled": "provider {name} has no api_key and is disabled (set {env} to enable it)",
        "config.warn_mcp_env": "MCP server {name} references the unset environment variable {var} in its headers; server skipped",
        "config.warn_unknown_key": "unknown key {key} in config.toml ignored (a typo?)",
        "turn.cancelled": "Cancelled",
        "turn.busy": "Still working on the previous message; wait or send /cancel",
        "turn.tool_limit": "This message reached the tool-call limit ({limit}); no more tools will run",
        "provider.error": "Model call failed: {detail}",
        "provider.no_images": "does not accept images (capabilities lack attachments): switch with /provider to one that does",
        "provider.unavailable": "provider {name} is unavailable (not configured or no api_key); available: {available}",
        "provider.switched": "Switched to provider {name} (model {model})",
        "provider.current": "Current provider: {name} (model {model}); available: {available}",
        "model.invalid": "model {model} is not in provider {provider}'s models list; choose from: {models}",
        "model.switched": "Switched to model {model}",
        "model.current": "Current model: {model}; choose from: {models}",
        "session.new": "Started a new session",
        "session.none": "No sessions yet",
        "session.list_header": "Sessions (continue one with /resume #n):",
        "session.untitled": "(untitled)",
        "session.bad_ref": "Invalid session number {ref}: list them with /history, then /resume #n",
        "session.resumed": "Resumed session #{n}: {title}",
        "session.deleted": "Deleted {count} session(s)",
        "console.welcome": "Kernel terminal chat (provider {provider} / model {model}). /exit quits, Ctrl-C cancels the current reply.",
        "console.help": "Commands: /new  /history  /resume #n  /provider [name]  /model [name]  /exit",
        "console.unknown_command": "Unknown command {cmd}; {help}",
        "console.tool_call": "⚙ {name}({args})",
        "console.tool_result_ok": "  ✓ {summary}",
        "console.tool_result_err": "  ✗ {summary}",
        "console.error": "✗ {message}",
        "console.bye": "Bye",
    },
}

LANGUAGES = tuple(CATALOG)


def set_language(language: str) -> None:
    global _language
    if language not in CATALOG:
        raise ValueError(f"unsupported language {language!r}; choose from {LANGUAGES}")
    _language = language


def get_language() -> str:
    return _language


def t(key: str, /, **values: Any) -> str:
    """The catalogue text for ``key`` in the active language, formatted with ``values``."""
    table = CATALOG[_language]
    template = table.get(key) or CATALOG["zh"][key]
    return template.format(**values)
