"""testing/apiserver."""
