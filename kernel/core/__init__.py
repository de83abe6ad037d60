"""Kernel's bottom layer: shared types, errors, the message catalogue, secrets and
the small utilities every other package may use. Imports nothing else of Kernel."""
