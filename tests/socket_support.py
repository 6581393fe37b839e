"""Raw-socket helpers for the server tests that play slow or stalled clients."""

from __future__ import annotations

import socket


def read_until_closed(client: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (then closes ours)."""
    received = b""
    try:
        while chunk := client.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass  # closed with unread bytes of ours left: a close all the same
    finally:
        client.close()
    return received
