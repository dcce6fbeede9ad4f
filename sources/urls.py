"""URLs that may carry secrets (`user:password@`, a token in the query): take the credentials out
before a request, and show only the redacted form in metadata, logs and errors."""

from urllib.parse import unquote, urlsplit, urlunsplit


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """(the URL without `user:password@`, (user, password) or None)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc)), (unquote(parts.username or ""), unquote(parts.password or ""))


def redact_url(url: str) -> str:
    """The URL as it may be shown: credentials out, query string out (a token may ride there)."""
    bare, _ = split_credentials(url or "")
    return urlunsplit(urlsplit(bare)._replace(query="", fragment=""))
