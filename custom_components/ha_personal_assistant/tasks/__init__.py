"""Reminders, timers and watches: durable tasks judged when they fire."""
