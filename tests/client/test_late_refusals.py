"""Which context-less errors a socket drops after a refusal: up to one 429 for each piece the refused
context had sent, within twice its round trip (at least MIN_WINDOW_S), until a later context is answered."""

from __future__ import annotations

from sonic_deploy.client.late_refusals import MIN_WINDOW_S, LateRefusals

BARE_429 = {"type": "error", "status_code": 429}


def test_one_429_for_each_piece_sent_before_the_refusal_then_none() -> None:
    late = LateRefusals()
    late.refused(pieces=3, first_sent_at=10.0, last_message=7, now=10.001)
    assert late.pending(10.002)
    assert not late.drop({"type": "error", "status_code": 500}, 10.002)  # not a refusal: routed
    assert not late.drop({**BARE_429, "context_id": "other"}, 10.002)  # named: routed by its name
    assert [late.drop(BARE_429, 10.002) for _ in range(3)] == [True, True, False]
    assert (late.dropped, late.pending(10.002)) == (2, False)


def test_the_window_closes_after_two_round_trips_or_the_minimum() -> None:
    late = LateRefusals()
    late.refused(pieces=2, first_sent_at=10.0, last_message=4, now=10.5)  # a 0.5 s round trip
    assert late.pending(11.5) and not late.pending(11.5 + 1e-6)
    quick = LateRefusals()
    quick.refused(pieces=2, first_sent_at=10.0, last_message=4, now=10.001)
    assert quick.pending(10.001 + MIN_WINDOW_S) and not quick.drop(BARE_429, 10.002 + MIN_WINDOW_S)


def test_a_context_sent_after_the_pieces_answered_means_all_were() -> None:
    late = LateRefusals()
    late.refused(pieces=4, first_sent_at=10.0, last_message=9, now=10.001)
    late.answered(first_message=8)  # sent before the last piece: proves nothing
    assert late.pending(10.002)
    late.answered(first_message=10)
    assert not late.pending(10.002)


def test_a_refused_single_piece_leaves_nothing_to_expect() -> None:
    late = LateRefusals()
    late.refused(pieces=1, first_sent_at=10.0, last_message=3, now=10.001)
    assert not late.pending(10.002) and not late.drop(BARE_429, 10.002)
