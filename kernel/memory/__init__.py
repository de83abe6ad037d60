"""Long-term memory (SPEC §6): tokens for search, the memory service, <remember> tags."""
