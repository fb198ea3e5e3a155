"""Guessing one account from many addresses (OWASP device cookies): past 10 failures in 15 minutes from
browsers without the account's device cookie every further try from such a browser waits (429 and
Retry-After, growing), while the browser that signed in as that user before signs in at once. The
limiter's tables, when full, forget keys that do not wait before the ones that do.

The HTTP test runs a real uvicorn (`test_security_access.served`) and 50 clients whose connections
come from 50 loopback addresses (127.0.0.1 to 127.0.0.50).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from argon2 import PasswordHasher
from test_security_access import Clock, client_at, console_served, login

from campusguard.app.console.identity.auth import LoginLimiter
from campusguard.app.console.identity.devices import DEVICE_COOKIE, MAX_ENTRIES, DeviceCookies, device_key_beside
from campusguard.app.console.identity.users import UserStore


def test_fifty_addresses_times_five_wrong_admin_passwords_then_the_admins_browser_signs_in(console_video, tmp_path):
    """Target 5: at most 15 of 250 wrong guesses answered 401 (the rest 429), the admin's browser is let in."""
    with console_served(console_video, tmp_path) as (c, url), client_at(url, "127.0.0.1") as browser:
        first = login(browser, "ada", "admin-pass-1")
        assert first.status_code == 200 and DEVICE_COOKIE in browser.cookies
        [cookie] = [c for c in first.headers.get_list("set-cookie") if c.startswith(f"{DEVICE_COOKIE}=")]
        assert "cg_device=" in cookie and "Max-Age=7776000" in cookie and "HttpOnly" in cookie
        assert "Path=/api/v1/auth" in cookie and "SameSite=strict" in cookie
        assert (
            browser.post(
                "/api/v1/auth/logout", headers={"Authorization": f"Bearer {first.json()['token']}"}
            ).status_code
            == 204
        )
        answers = []
        attackers = [client_at(url, f"127.0.0.{n}") for n in range(1, 51)]
        try:
            for round_ in range(5):
                for n, attacker in enumerate(attackers):
                    answers.append(login(attacker, "ada", f"guess-{round_}-{n}"))
        finally:
            for attacker in attackers:
                attacker.close()
        codes = [r.status_code for r in answers]
        assert len(codes) == 250
        assert set(codes) <= {401, 429} and codes.count(401) <= 15, f"{codes.count(401)} answered 401"
        assert all(1 <= int(r.headers["retry-after"]) <= 900 for r in answers if r.status_code == 429)
        # the right password from a new browser is held back too (it cannot be told from the attacker) ...
        with client_at(url, "127.0.0.60") as stranger:
            assert login(stranger, "ada", "admin-pass-1").status_code == 429
            # ... and so is a browser with another user's device cookie, or a forged one
            assert login(stranger, "vera", "viewer-pass-1").status_code == 200
            assert login(stranger, "ada", "admin-pass-1").status_code == 429
            stranger.cookies.set(DEVICE_COOKIE, browser.cookies[DEVICE_COOKIE][:-3] + "AAA")
            assert login(stranger, "ada", "admin-pass-1").status_code == 429
        # the admin's browser, at an attacker's address, signs in at once
        again = login(browser, "ada", "admin-pass-1")
        assert again.status_code == 200, again.text
        failed = [e for e in c.users.audit_entries(limit=1000, action="login.failed")[0]]
        assert len(failed) == codes.count(401) and not any(e.details["known_browser"] for e in failed)
        logins = c.users.audit_entries(limit=10, action="login")[0]
        assert logins[0].details["known_browser"] is True


def test_concurrent_guesses_from_fifty_addresses_cannot_all_pass_the_check(console_video, tmp_path):
    """The 250 guesses at once (50 addresses, each 5 in a row, all in parallel): still at most 15 answered 401;
    each check and count of one name is done in turn, so no burst passes before the first failure counts."""
    with console_served(console_video, tmp_path) as (c, url):
        # a hash that takes ~30 ms to check (argon2 reads its cost from the hash): a window races would use
        slow = UserStore(c.users.path, password_hasher=PasswordHasher(time_cost=30, memory_cost=1024, parallelism=1))
        slow.set_password("otto", "operator-pass-1")
        slow.close()
        attackers = [client_at(url, f"127.0.0.{n}") for n in range(1, 51)]

        def guess(n: int) -> list[int]:
            return [login(attackers[n], "otto", f"guess-{n}-{i}").status_code for i in range(5)]

        try:
            with ThreadPoolExecutor(max_workers=50) as pool:
                codes = [code for codes in pool.map(guess, range(50)) for code in codes]
        finally:
            for attacker in attackers:
                attacker.close()
        assert len(codes) == 250 and set(codes) <= {401, 429}
        assert codes.count(401) <= 15, f"{codes.count(401)} answered 401"


def test_account_limit_counts_untrusted_browsers_within_the_window():
    clock = Clock()
    limiter = LoginLimiter(free_per_account=10, account_window_s=900.0, account_base_delay_s=2.0, clock=clock)
    for n in range(9):
        assert limiter.failed("ada", f"10.0.0.{n}") is None
    assert limiter.failed("ada", "10.0.1.1") == 2.0  # the 10th failure, from anywhere
    assert limiter.retry_after("ada", "10.0.9.9") == 2.0  # every untrusted browser waits
    assert limiter.retry_after("otto", "10.0.9.9") is None  # other accounts do not
    assert limiter.retry_after("ada", "10.0.9.9", device="nonce-1") is None  # the admin's own browser neither
    clock.now += 2.0
    assert limiter.failed("ada", "10.0.2.2") == 4.0  # growing
    clock.now += 901.0  # the window passed: the count starts again
    assert limiter.retry_after("ada", "10.0.9.9") is None
    assert limiter.failed("ada", "10.0.3.3") is None


def test_a_trusted_browser_has_its_own_count():
    clock = Clock()
    limiter = LoginLimiter(free_per_pair=5, clock=clock)
    delays = [limiter.failed("ada", "10.0.0.1", device="nonce-1") for _ in range(6)]
    assert delays[:4] == [None] * 4 and delays[4:] == [1.0, 2.0]
    assert limiter.retry_after("ada", "10.0.0.1", device="nonce-1") == 2.0  # a stolen cookie is no free pass
    assert limiter.retry_after("ada", "10.0.0.1", device="nonce-2") is None
    assert limiter.retry_after("ada", "10.0.0.1") is None  # nor did it count for the address or the account


def test_full_tables_forget_keys_that_do_not_wait_first():
    clock = Clock()
    limiter = LoginLimiter(free_per_pair=2, free_per_address=2, free_per_account=2, max_keys=30, clock=clock)
    for _ in range(2):
        limiter.failed("ada", "10.0.0.1")
    assert limiter.retry_after("ada", "10.0.0.1") is not None
    for i in range(5000):  # a flood of made-up names from many addresses, one try each: none waits
        limiter.failed(f"n{i}", f"10.1.{i // 250}.{i % 250}")
    assert len(limiter) <= 30
    assert limiter.retry_after("ada", "10.0.0.1") is not None  # the oldest keys, but waiting: kept
    assert limiter.retry_after("ada", "10.9.9.9") is not None  # the account too


def test_device_cookies(tmp_path):
    clock = Clock()
    key = device_key_beside(tmp_path / "users.db")
    assert key == device_key_beside(tmp_path / "users.db") and len(key) == 32  # kept across restarts
    assert (tmp_path / "users.db.device-key").stat().st_mode & 0o777 == 0o600
    devices = DeviceCookies(key, ttl_s=100, clock=clock)
    cookie = devices.after_login(None, "ada")
    nonce = devices.trusted(cookie, "ada")
    assert nonce and devices.trusted(cookie, "otto") is None
    assert DeviceCookies(b"k" * 32, clock=clock).trusted(cookie, "ada") is None  # another server's key
    payload, _, signature = cookie.partition(".")
    assert devices.trusted(payload + "." + signature[::-1], "ada") is None
    both = devices.after_login(cookie, "otto")
    assert devices.trusted(both, "ada") == nonce and devices.trusted(both, "otto")
    many = cookie
    for n in range(MAX_ENTRIES + 3):
        many = devices.after_login(many, f"user{n}")
    assert many.count("~") == MAX_ENTRIES - 1 and devices.trusted(many, "ada") is None
    clock.now += 101
    assert devices.trusted(both, "ada") is None  # expired
    for junk in ["", "~~~", "a.b", "x" * 5000, "\u00e9.\u00e9"]:
        assert devices.trusted(junk, "ada") is None
    with pytest.raises(ValueError):
        DeviceCookies(b"short")
