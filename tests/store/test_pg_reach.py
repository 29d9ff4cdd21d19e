"""How a process says that its database went away and came back (``store/pg/session.py``): once per outage,
whichever of its connections finds it. The outages themselves, on a real server, are in test_pg_outage.py."""

from __future__ import annotations

import logging

import pytest

from vaultsync.store.pg.session import Reach

pytestmark = pytest.mark.pg


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage().split(" (")[0] for r in caplog.records if r.name == "vaultsync.store.pg"]


def test_the_stores_of_one_process_share_what_they_know_of_one_database() -> None:
    first = Reach.of("postgresql://u@/reach_shared")
    assert Reach.of("postgresql://u@/reach_shared") is first
    assert Reach.of("postgresql://u@/reach_other") is not first


def test_a_connection_cut_by_the_outage_just_ended_is_mended_without_a_word(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "vaultsync.store.pg")
    reach = Reach("postgresql://u@/reach_tail")
    reach.lost("terminated")  # the writer's connection finds the outage
    reach.failed("refused")
    reach.back()
    reach.lost("terminated")  # the readers' connection finds it later: the same outage
    reach.back()
    assert _said(caplog) == [
        "lost the connection to the database postgresql://u@/reach_tail",
        "reconnected to the database postgresql://u@/reach_tail after 0.0 s",
    ]
    assert reach.losses == 2 and not reach.down


def test_the_database_away_again_soon_after_it_came_back_is_said(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "vaultsync.store.pg")
    reach = Reach("postgresql://u@/reach_again")
    reach.lost("terminated")
    reach.back()
    reach.lost("terminated")  # a late-found cut connection ...
    reach.failed("refused")  # ... but no new one can be had: the database is away again
    reach.back()
    assert [line.split(" after")[0] for line in _said(caplog)] == [
        "lost the connection to the database postgresql://u@/reach_again",
        "reconnected to the database postgresql://u@/reach_again",
        "lost the connection to the database postgresql://u@/reach_again",
        "reconnected to the database postgresql://u@/reach_again",
    ]
