"""Retention planning (``vaultsync.retention``) on constructed timelines with known times: which batches a policy
keeps, where its horizon falls, and the policies it refuses."""

from __future__ import annotations

import datetime as dt

import pytest

from vaultsync.errors import ConfigError
from vaultsync.retention import DAY, HOUR, WEEK, parse_policy, plan
from vaultsync.times import to_micros

MIN = 60_000_000
NOW = to_micros(dt.datetime(2024, 3, 20, 12, 0, tzinfo=dt.UTC))  # a Wednesday


def at(**ago: int) -> int:
    return NOW - int(dt.timedelta(**ago).total_seconds() * 1_000_000)


def test_policies_are_parsed_normalized_and_refused_in_one_line() -> None:
    policy = parse_policy("keep_all=24h, hourly=7d  daily=90d weekly=forever")
    assert (policy.keep_all, policy.hourly, policy.daily, policy.weekly) == (DAY, 7 * DAY, 90 * DAY, None)
    assert policy.text == "keep_all=1d hourly=1w daily=90d weekly=forever"
    assert policy.forgets is None
    assert parse_policy("keep_all=2w").forgets == 2 * WEEK  # no later tier: older history is forgotten
    for bad, said in [
        ("", "empty retention policy"),
        ("monthly=3d", "invalid retention term 'monthly=3d'"),
        ("hourly=7", "invalid retention term"),
        ("keep_all=1d keep_all=2d", "given twice"),
        ("keep_all=7d hourly=1d", "hourly is shorter than keep_all"),
        ("daily=forever weekly=10w", "weekly follows daily=forever"),
        ("keep_all=0h", "keeps nothing"),
    ]:
        with pytest.raises(ConfigError, match=said) as caught:
            parse_policy(bad)
        assert "\n" not in str(caught.value)


def test_each_tier_keeps_the_last_batch_of_each_bucket() -> None:
    policy = parse_policy("keep_all=1d hourly=2d daily=7d weekly=forever")
    times = [
        at(days=40),  # 1  week of 2024-02-05: the last of its week is 2
        at(days=39),  # 2
        at(days=20, hours=1),  # 3  week of 2024-02-26 (Thursday 2024-02-29): alone in its week
        at(days=5, hours=2),  # 4  2024-03-15 10:00: day bucket; 5 is later that day
        at(days=5, hours=1),  # 5
        at(days=4),  # 6  alone on its day
        at(days=1, hours=5, minutes=50),  # 7  2024-03-19 06:10: hour bucket 06:xx, with 8
        at(days=1, hours=5, minutes=10),  # 8
        at(days=1, hours=3),  # 9  alone in its hour
        at(hours=20),  # 10 keep_all: every batch
        at(hours=20, minutes=-1),  # 11
        at(minutes=1),  # 12
    ]
    rows = list(enumerate(times, start=1))
    assert [t for _, t in rows] == sorted(times)
    got = plan(policy, rows, NOW)
    assert got.kept == [2, 3, 5, 6, 8, 9, 10, 11, 12]
    assert (got.horizon, got.batches, got.thinned) == (None, 12, 3)


def test_weeks_are_iso_weeks_and_days_utc_days() -> None:
    policy = parse_policy("weekly=forever")
    sunday = to_micros(dt.datetime(2024, 3, 10, 23, 59, tzinfo=dt.UTC))
    monday = to_micros(dt.datetime(2024, 3, 11, 0, 0, tzinfo=dt.UTC))
    assert plan(policy, [(1, sunday - DAY), (2, sunday), (3, monday)], NOW).kept == [2, 3]
    daily = parse_policy("daily=forever")
    assert plan(daily, [(1, monday - MIN), (2, monday), (3, monday + 23 * HOUR)], NOW).kept == [1, 3]


def test_a_finite_last_tier_keeps_the_state_at_its_horizon() -> None:
    policy = parse_policy("keep_all=1d daily=10d")
    rows = [(1, at(days=30)), (2, at(days=12)), (3, at(days=9, hours=2)), (4, at(days=9, hours=1)), (5, at(hours=2))]
    got = plan(policy, rows, NOW)
    assert got.kept == [2, 4, 5]  # 2: the state at the horizon (ten days ago), which a read then answers
    assert got.horizon == NOW - 10 * DAY
    nothing_old = plan(policy, rows[2:], NOW)
    assert nothing_old.horizon is None and nothing_old.kept == [4, 5]


def test_the_latest_batch_is_always_kept_and_an_empty_vault_plans_nothing() -> None:
    policy = parse_policy("weekly=forever")
    rows = [(7, at(days=2)), (9, at(days=1))]  # Monday and Tuesday: one week, whose last is the latest
    assert plan(policy, rows, NOW).kept == [9]
    assert plan(policy, [], NOW).kept == []
