"""The ``delegate_to_cli`` tool, registered like any extension's tool (seed 004)."""

from __future__ import annotations

from typing import Any, Literal

from kernel.delegate.delegator import Delegator
from kernel.tools.registry import ToolContext, ToolRegistry

CLIName = Literal["claude_code", "codex", "gemini"]

DESCRIPTION = (
    "当用户需要执行文件操作、代码编辑、项目分析、Shell 命令、浏览器操作等实际任务时使用。"
    "把任务交给编码 CLI（默认 Claude Code）在子进程中完成，"
    "返回 {ok, cli, version, cwd, exit_code, reason, output_path, output}；output 是 CLI 的"
    "最终回答（超过 5 万字符时保留头尾），完整输出在 output_path；ok 为 false 时 reason "
    "用一句话说明原因（如 CLI 无法连接其 API）。一次只能运行一个任务。"
)


def register(registry: ToolRegistry, delegator: Delegator) -> None:
    @registry.tool(description=DESCRIPTION)
    async def delegate_to_cli(
        task: str,
        cwd: str | None = None,
        cli: CLIName | None = None,
        context: ToolContext | None = None,
    ) -> dict[str, Any]:
        """Run a task with a coding-agent CLI.

        Args:
            task: the complete, self-contained instruction for the CLI (it sees nothing
                of this conversation)
            cwd: working directory; default: general.default_workspace
            cli: claude_code (default), codex or gemini; only when the owner asks for one
        """
        conversation = context.conversation if context is not None else ""
        return await delegator.delegate(task, cwd, cli, conversation=conversation)
