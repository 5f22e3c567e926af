"""The 429s a server may still send for a refused context's pieces, naming no context (issue 31): which of
a socket's context-less errors to drop rather than route (cartesia_ws.CartesiaSocket)."""

from __future__ import annotations

from typing import Any

# How long after a refusal its late errors may come: twice the refused request's round trip, and at least
# this (a server answers each piece as it reads it; the pieces were all sent before the refusal came back).
# Generous: the socket only waits that long before taking new contexts, and a busy machine is slow.
MIN_WINDOW_S = 1.0


class LateRefusals:
    """After a 429 naming no context for a context that had sent several pieces, up to one more such 429 for
    each of those pieces, within a round trip or two. A context sends nothing once refused, so no more can
    come. They are dropped, not routed: routed, they would end an admitted context.

    A server may answer each late piece, or none (then a refused context's one 429 is all). So that a 429 in
    the window is never a new context's refusal, the socket takes no new context while any may still come
    (`pending`: its pool opens another). Left: a 429 naming no context for an admitted context, mid-stream,
    in that window, is dropped too (that context then waits for its timeout). A server answering a socket's
    messages in order has answered every late piece once a context sent after them is answered: then, and
    when the window closes, nothing more is expected."""

    def __init__(self) -> None:
        self.expected = 0
        self.dropped = 0
        self._until_message = 0
        self._deadline = 0.0

    def refused(self, pieces: int, first_sent_at: float, last_message: int, now: float) -> None:
        """A context that sent `pieces` (the last as the socket's message `last_message`, the first at
        `first_sent_at`) was refused by an error naming no context, read at `now`."""
        if pieces > 1:
            self.expected += pieces - 1
            window = max(MIN_WINDOW_S, 2 * (now - first_sent_at))
            self._deadline = max(self._deadline, now + window)
            self._until_message = max(self._until_message, last_message)

    def answered(self, first_message: int) -> None:
        """A context whose first send was the socket's message `first_message` got a message for itself."""
        if first_message > self._until_message:
            self.expected = 0

    def pending(self, now: float) -> bool:
        """Whether late 429s may still come at `now` (perf_counter())."""
        if self.expected and now > self._deadline:
            self.expected = 0
        return self.expected > 0

    def drop(self, message: dict[str, Any], now: float) -> bool:
        """Whether `message` is one of the late 429s, read at `now`."""
        if not self.pending(now):
            return False
        late = message.get("status_code") == 429 and message.get("context_id") is None
        if late and message.get("type") == "error":
            self.expected -= 1
            self.dropped += 1
            return True
        return False
