"""Command-line tools of mytorch."""
