"""Tests for the ha_personal_assistant custom integration."""
