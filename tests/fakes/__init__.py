"""Loopback fakes of external services, following their documented REST APIs (for tests only)."""
