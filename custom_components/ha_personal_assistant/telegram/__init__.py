"""Telegram: telegram_bot events in, replies out (gateway.py composes the parts)."""
