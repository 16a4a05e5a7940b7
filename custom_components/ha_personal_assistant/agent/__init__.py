"""The LangGraph agent: prompts, state and graph."""
