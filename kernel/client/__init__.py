"""The command-line client of the running sidecar: ``kernel chats|models|env``, and
``kernel chat`` when Kernel runs."""
