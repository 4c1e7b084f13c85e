"""Patch engines: JSON merge patch, JSON patch, strategic merge patch and server-side apply."""
