"""Test support: local stand-ins for the services statewright talks to."""
