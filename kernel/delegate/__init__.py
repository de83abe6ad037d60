"""Delegation of real work to coding-agent CLIs (SPEC §7, seed 003): the runner, one
formatter per CLI's JSONL stream, the Delegator the Kernel owns, and the tool."""
