"""Constants for the Home Assistant Personal Assistant integration."""

from __future__ import annotations

import logging
from typing import Final

DOMAIN: Final = "ha_personal_assistant"
LOGGER = logging.getLogger(__package__)
# Fired with the resolved action each time a service call is executed.
EVENT_ACTION_EXECUTED: Final = f"{DOMAIN}_action_executed"

# Config entry data.
CONF_OLLAMA_URL: Final = "ollama_url"
CONF_MODEL: Final = "model"
CONF_EMBEDDING_MODEL: Final = "embedding_model"
DEFAULT_OLLAMA_URL: Final = "http://localhost:11434"
# The model server's API: "ollama" (the default; entries without the key are
# Ollama entries) or "openai_compatible" (model_server.Backend).
CONF_BACKEND: Final = "backend"
# An OpenAI-compatible server: its API's base URL and an optional key.
CONF_BASE_URL: Final = "base_url"
CONF_API_KEY: Final = "api_key"
# llama-server's default port; vLLM's is 8000, LM Studio's 1234, LocalAI's 8080.
DEFAULT_BASE_URL: Final = "http://localhost:8080/v1"

# Options.
CONF_CONFIRMATION_TIMEOUT: Final = "confirmation_timeout"
DEFAULT_CONFIRMATION_TIMEOUT: Final = 300  # seconds
CONF_SESSION_TIMEOUT: Final = "session_timeout"
DEFAULT_SESSION_TIMEOUT: Final = 30  # minutes
CONF_NUM_CTX: Final = "num_ctx"
DEFAULT_NUM_CTX: Final = 8192
MIN_NUM_CTX: Final = 2048
MAX_NUM_CTX: Final = 131072
CONF_NUM_PREDICT: Final = "num_predict"
# A chat reply of a few paragraphs, or a tool call; a longer answer is cut.
DEFAULT_NUM_PREDICT: Final = 512
MIN_NUM_PREDICT: Final = 64
MAX_NUM_PREDICT: Final = 8192
# Summaries and learning: a few sentences or a few JSON lines.
BACKGROUND_NUM_PREDICT: Final = 256
CONF_KEEP_ALIVE: Final = "keep_alive"
DEFAULT_KEEP_ALIVE: Final = -1  # seconds; -1 keeps the model loaded
CONF_REQUEST_TIMEOUT: Final = "request_timeout"
DEFAULT_REQUEST_TIMEOUT: Final = 120  # seconds for one model round trip
CONF_WEB_SEARCH: Final = "web_search"
DEFAULT_WEB_SEARCH: Final = True
# Home Assistant's Assist tools (timers, to-do, calendar, broadcast) in our agent.
CONF_HA_TOOLS: Final = "ha_tools"
DEFAULT_HA_TOOLS: Final = False
# HA's intent recognizer answers known commands first (agent/fast_path.py).
CONF_FAST_PATH: Final = "fast_path"
DEFAULT_FAST_PATH: Final = True
CONF_ALLOWED_USER_IDS: Final = "allowed_user_ids"
CONF_USER_MAPPING: Final = "user_mapping"
# Voice notes, photos and files (media.py, speech.py).
CONF_STT_ENGINE: Final = "stt_engine"  # an STT entity; default: Assist's
CONF_TTS_ENGINE: Final = "tts_engine"  # a TTS entity; default: Assist's
CONF_VOICE_REPLIES: Final = "voice_replies"
DEFAULT_VOICE_REPLIES: Final = False
# Send the fixed prompt prefix to the model server after the events that
# lose it (setup, catalogue changes, background calls, a server restart).
CONF_WARM_CACHE: Final = "warm_cache"
DEFAULT_WARM_CACHE: Final = True
CONF_VISION_MODEL: Final = "vision_model"  # an Ollama model that takes images

# The Ollama API.
OLLAMA_PROBE_TIMEOUT: Final = 10  # seconds for /api/tags and /api/show
# Seconds for the one-token request that tells whether an OpenAI-compatible
# server's model can call tools (it may have to load the model first).
TOOL_PROBE_TIMEOUT: Final = 120
# A model the server is still loading gets at most this long for its first
# word (a large model from a slow disk on a Pi).
MAX_LOADING_WAIT: Final = 600.0

# Storage, relative to the HA config directory.
STORAGE_DIR: Final = DOMAIN
DATABASE_FILE: Final = "assistant.db"
CHECKPOINT_FILE: Final = "langgraph_checkpoints.db"

# Runtime limits.
EXECUTOR_WORKERS: Final = 3
MAX_CONCURRENT_MODEL_CALLS: Final = 2
TELEGRAM_MESSAGE_LIMIT: Final = 4096
TYPING_REFRESH_SECONDS: Final = 4.0
MAX_FEEDBACK_ROUNDS: Final = 2
MAX_TOOL_ROUNDS: Final = 6
RECURSION_LIMIT: Final = 25

# Option ranges offered in the options flow.
MIN_CONFIRMATION_TIMEOUT: Final = 30  # seconds
MAX_CONFIRMATION_TIMEOUT: Final = 3600  # seconds
MIN_SESSION_TIMEOUT: Final = 1  # minutes
MAX_SESSION_TIMEOUT: Final = 1440  # minutes
MIN_KEEP_ALIVE: Final = -1  # seconds; -1 keeps the model loaded
MAX_KEEP_ALIVE: Final = 86400  # seconds
MIN_REQUEST_TIMEOUT: Final = 1  # seconds
MAX_REQUEST_TIMEOUT: Final = 600  # seconds

# Permission policy options (policy/rules.py reads them).
CONF_CONFIRM_SERVICES: Final = "confirm_services"
CONF_BLOCKED_SERVICES: Final = "blocked_services"
CONF_ALLOWED_SCRIPTS: Final = "allowed_scripts"
CONF_ADMIN_USER_IDS: Final = "admin_user_ids"

# Profile memory and background learning (memory/).
MAX_FACT_CHARS: Final = 300
# Learning (like every background model call) waits until the chats have been
# quiet (model_queue.QUIET_SECONDS), and then asks at most once per interval.
LEARNING_INTERVAL_SECONDS: Final = 120.0
LEARNING_QUEUE_SIZE: Final = 50
LEARNING_BATCH: Final = 5
# What background learning may claim: a guess, never as sure as being told.
LEARNED_MAX_CONFIDENCE: Final = 0.6
# Unreinforced inferred entries fade: 3 % a day, gone below the floor
# (an entry learned at 0.6 lasts about five weeks without reinforcement).
PROFILE_DECAY_PER_DAY: Final = 0.97
PROFILE_CONFIDENCE_FLOOR: Final = 0.2
PROFILE_DECAY_INTERVAL_HOURS: Final = 6
INTERACTION_RETENTION_DAYS: Final = 30

# Documents and retrieval (documents.py, store/vectors.py).
DOCUMENTS_DIR: Final = "documents"
DOCUMENT_SUFFIXES: Final = (".txt", ".md")
CHUNK_CHARS: Final = 1000
CHUNK_OVERLAP: Final = 200
EMBED_BATCH: Final = 16
EMBED_TIMEOUT: Final = 120  # seconds for one batch of embeddings
MAX_DOCUMENT_CHARS: Final = 500_000
# add_document answers once the document is searchable, or after this many
# seconds (a long document on a slow server, or Ollama down) saying it is
# queued; the rest is embedded in the background and search says so.
ADD_DOCUMENT_WAIT: Final = 30.0
MAX_DOCUMENT_TITLE_CHARS: Final = 200
MAX_FILE_BYTES: Final = 2_000_000
QUERY_CACHE_SIZE: Final = 128
SEARCH_RESULTS: Final = 5
# Household notices (tasks/notices.py): the night hours and how long a door,
# garage door or window may stay open in them before a notice.
CONF_NIGHT_HOURS: Final = "night_hours"
DEFAULT_NIGHT_HOURS: Final = "22:00-07:00"
CONF_OPEN_MINUTES: Final = "open_minutes"
# Telegram user ids who get household notices without /notices on.
CONF_NOTICE_USER_IDS: Final = "notice_user_ids"
DEFAULT_OPEN_MINUTES: Final = 30
