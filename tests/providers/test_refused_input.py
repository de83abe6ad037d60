"""Which provider 4xx answers refuse the owner's content (set the message aside) and
which are about Kernel's request (shown as a provider error, the message kept)."""

from __future__ import annotations

import pytest

from kernel.providers.errors import refuses_input


@pytest.mark.parametrize(
    ("status", "code", "message"),
    [
        (400, "invalid_request_error", "prompt is too long: 210345 tokens > 200000 maximum"),
        (
            400,
            "invalid_request_error",
            "messages.0.content.1.image.source.base64: Could not process image",
        ),
        (400, "invalid_request_error", "image exceeds 5 MB maximum: 6291456 bytes > 5242880 bytes"),
        (413, "request_too_large", "Request exceeds the maximum allowed number of bytes."),
        (400, "context_length_exceeded", "This model's maximum context length is 8192 tokens."),
        (
            400,
            "",
            "This model's maximum context length is 65536 tokens. However, you requested 70000",
        ),
        (400, "invalid_image_format", "You uploaded an unsupported image."),
        (400, "content_filter", "The response was filtered due to the prompt triggering a policy."),
        (400, "data_inspection_failed", "Input data may contain inappropriate content."),
        (403, "content_policy_violation", "Your request was rejected by the safety system."),
        (422, "", "The input token count (1200000) exceeds the maximum number of tokens allowed"),
        (400, "1301", "系统检测到输入或生成内容可能包含不安全或敏感内容"),
    ],
)
def test_content_refusals(status: int, code: str, message: str) -> None:
    assert refuses_input(status, code, message)


@pytest.mark.parametrize(
    ("status", "code", "message"),
    [
        (400, "invalid_request_error", "max_tokens: Input should be less than or equal to 8192"),
        (
            400,
            "invalid_request_error",
            "messages.1: `tool_use` ids were found without `tool_result`",
        ),
        (400, "invalid_request_error", "messages: roles must alternate between user and assistant"),
        (400, "invalid_request_error", "temperature: Input should be less than or equal to 1"),
        (401, "authentication_error", "invalid x-api-key"),
        (403, "permission_error", "Your API key does not have permission to use the image model"),
        (404, "not_found_error", "model: claude-x"),
        (400, "model_not_found", "The model `gpt-x` does not exist"),
    ],
)
def test_request_problems_are_not_the_owners(status: int, code: str, message: str) -> None:
    assert not refuses_input(status, code, message)
