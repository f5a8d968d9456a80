"""The verified-token cache (runner.principal.from_token) never accepts what verification would refuse.

A bearer verified once is reused by its exact string until its exp passes. These tests
check the ways a cache could be fooled: a token past its exp, the same token under another
secret or audience, and a token altered by one character after its original was cached.
"""

from __future__ import annotations

import time
import uuid

import pytest

from runner import LOCAL_JWT_SECRET, Refused, from_token
from runner import sign_token as sign


def user_claims() -> dict[str, str]:
    return {"sub": str(uuid.uuid4()), "role": "authenticated", "aud": "authenticated"}


@pytest.mark.slow
def test_a_cached_token_is_refused_once_it_has_expired() -> None:
    claims = user_claims()
    token = sign({**claims, "exp": int(time.time()) + 1}, LOCAL_JWT_SECRET)
    first = from_token(token, secret=LOCAL_JWT_SECRET, leeway_s=0)
    assert first.claims["sub"] == claims["sub"]
    assert from_token(token, secret=LOCAL_JWT_SECRET, leeway_s=0).claims["sub"] == claims["sub"]  # a hit
    while time.time() <= first.claims["exp"]:
        time.sleep(0.1)
    with pytest.raises(Refused, match="expired"):
        from_token(token, secret=LOCAL_JWT_SECRET, leeway_s=0)
    with pytest.raises(Refused, match="expired"):  # and again, now verified afresh
        from_token(token, secret=LOCAL_JWT_SECRET, leeway_s=0)


def test_a_token_cached_under_one_secret_is_not_accepted_under_another() -> None:
    token = sign(user_claims(), LOCAL_JWT_SECRET)
    from_token(token, secret=LOCAL_JWT_SECRET)
    with pytest.raises(Refused, match="refused"):
        from_token(token, secret="another-projects-secret-of-at-least-32-chars")


def test_a_token_cached_under_one_audience_is_checked_against_another() -> None:
    token = sign({**user_claims(), "aud": "somebody-else"}, LOCAL_JWT_SECRET)
    from_token(token, secret=LOCAL_JWT_SECRET, audience="somebody-else")
    with pytest.raises(Refused, match="audience"):
        from_token(token, secret=LOCAL_JWT_SECRET, audience="authenticated")


def test_an_altered_copy_of_a_cached_token_is_verified_and_refused() -> None:
    claims = user_claims()
    token = sign(claims, LOCAL_JWT_SECRET)
    from_token(token, secret=LOCAL_JWT_SECRET)
    header, payload, signature = token.split(".")
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    with pytest.raises(Refused):
        from_token(f"{header}.{payload}.{flipped}", secret=LOCAL_JWT_SECRET)


def test_the_principal_of_a_hit_is_a_copy_the_caller_cannot_spoil_for_the_next() -> None:
    token = sign(user_claims(), LOCAL_JWT_SECRET)
    first = from_token(token, secret=LOCAL_JWT_SECRET)
    first.claims["role"] = "service_role"
    again = from_token(token, secret=LOCAL_JWT_SECRET)
    assert again.role == "authenticated" and again.claims["role"] == "authenticated"
