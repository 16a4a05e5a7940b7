"""The tools the model can call."""
