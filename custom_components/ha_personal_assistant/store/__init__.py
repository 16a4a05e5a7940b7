"""Storage: the assistant database and the LangGraph checkpoints."""
