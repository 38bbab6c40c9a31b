"""Leader election against a real (embedded) API server, with injected clocks and no sleeps:
candidates contend round by round (`step()`), time moves only when the test moves it.

Expiry is judged from when a candidate last saw the lease record change, on its own monotonic
clock (client-go's rule), so a paused leader is replaced one lease duration after it stopped
renewing, and a wall clock hours off on any candidate changes nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from runtimekit.cluster.apiserver import ApiServer
from runtimekit.kube.http import KubeHttp
from runtimekit.kube.lease import LeaderElector

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/sched"
DURATION, PERIOD = 15.0, 2.0
HOUR = 3600.0


class World:
    """One shared time; each candidate reads it through its own clocks."""

    def __init__(self) -> None:
        self.now = 0.0


@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[KubeHttp]:
    client = KubeHttp.connect(server=apiserver.url, timeout=5.0)
    yield client
    client.close()


def candidate(http: KubeHttp, world: World, identity: str, origin: float = 0.0, skew: float = 0.0) -> LeaderElector:
    """A candidate whose monotonic clock starts at `origin` and whose wall clock is `skew` seconds off."""
    return LeaderElector(
        http,
        "sched",
        "kube-system",
        identity,
        DURATION,
        PERIOD,
        clock=lambda: origin + world.now,
        wall=lambda: 1_700_000_000.0 + world.now + skew,
    )


def leaders(*electors: LeaderElector) -> list[str]:
    return [e.identity for e in electors if e.leading.is_set()]


def test_two_candidates_the_leader_pauses_and_the_standby_takes_over_one_lease_later(http: KubeHttp) -> None:
    world = World()
    a, b = candidate(http, world, "a", origin=500.0), candidate(http, world, "b", origin=9_000.0)
    assert a.step()
    assert not b.step()
    for _ in range(20):  # forty seconds of renewals: the standby never takes over
        world.now += PERIOD
        assert a.step()
        assert not b.step()
    last_change = world.now  # a pauses here (a stuck process takes no more rounds)
    while world.now + PERIOD < last_change + DURATION:
        world.now += PERIOD
        assert not b.step(), f"took over {world.now - last_change:g} s after the last renewal"
    world.now += PERIOD
    assert b.step()
    world.now += PERIOD
    assert not a.step()  # back from its pause, a sees b holds the lease and steps down at once
    assert leaders(a, b) == ["b"]
    assert http.get(LEASE)["spec"]["leaseTransitions"] == 1


def test_three_candidates_at_most_one_leads_and_one_wins_a_simultaneous_try(http: KubeHttp) -> None:
    world = World()
    a, b, c = (candidate(http, world, name, origin=100.0 * i) for i, name in enumerate("abc"))
    for _ in range(5):
        for elector in (a, b, c):
            elector.step()
        assert leaders(a, b, c) == ["a"]
        world.now += PERIOD
    world.now += DURATION + PERIOD  # a is paused; b and c saw its last renewal a lease ago
    outcomes: dict[str, bool] = {}
    together = threading.Barrier(2)

    def contend(elector: LeaderElector) -> None:
        together.wait(10)
        outcomes[elector.identity] = elector.step()

    threads = [threading.Thread(target=contend, args=(e,)) for e in (b, c)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes.values()) == [False, True]
    (winner,) = [name for name, won in outcomes.items() if won]
    for _ in range(10):  # the winner renews, the loser stands by, a stays down once it looks
        world.now += PERIOD
        for elector in (a, b, c):
            elector.step()
        assert leaders(a, b, c) == [winner]
    assert http.get(LEASE)["spec"]["holderIdentity"] == winner


@pytest.mark.parametrize(
    ("leader_skew", "other_skews"),
    [
        pytest.param(-HOUR, (HOUR, 0.0), id="leader-an-hour-behind"),
        pytest.param(HOUR, (-HOUR, 0.0), id="leader-an-hour-ahead"),
        pytest.param(0.0, (HOUR, -HOUR), id="standbys-skewed"),
    ],
)
def test_skewed_wall_clocks_neither_steal_nor_keep_the_lease(
    http: KubeHttp, leader_skew: float, other_skews: tuple[float, float]
) -> None:
    world = World()
    a = candidate(http, world, "a", skew=leader_skew)
    others = [candidate(http, world, f"s{i}", origin=77.0 * (i + 1), skew=s) for i, s in enumerate(other_skews)]
    assert a.step()
    for _ in range(30):
        world.now += PERIOD
        for elector in (a, *others):
            elector.step()
        assert leaders(a, *others) == ["a"]
    paused_at = world.now
    while not any(e.step() for e in others):
        world.now += PERIOD
    assert DURATION <= world.now - paused_at <= DURATION + PERIOD


def test_a_leader_cut_off_from_the_api_server_steps_down_at_its_renew_deadline(
    http: KubeHttp, apiserver: ApiServer
) -> None:
    world = World()
    a = candidate(http, world, "a")
    assert a.step()
    apiserver.stop()
    try:
        world.now += PERIOD
        assert a.step()  # one failed renewal: still well within the deadline
        world.now = a.renew_deadline
        assert not a.step()
        assert a.renew_deadline < DURATION  # it stopped leading before anyone else may start
    finally:
        apiserver.start()


def test_release_hands_over_at_once(http: KubeHttp) -> None:
    world = World()
    a, b = candidate(http, world, "a"), candidate(http, world, "b")
    assert a.step()
    assert not b.step()
    a.release()
    assert b.step()
    assert http.get(LEASE)["spec"]["holderIdentity"] == "b"


def test_a_renew_deadline_not_shorter_than_the_lease_is_refused(http: KubeHttp) -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        LeaderElector(http, "x", "kube-system", "a", 15.0, 2.0, renew_deadline=15.0)


def test_on_lead_is_called_each_time_a_candidate_becomes_leader_and_not_on_renewals(http: KubeHttp) -> None:
    """The scheduler's first session of a term starts from this call, not from its next idle wake-up."""
    world, calls = World(), list[int]()
    a = LeaderElector(http, "sched", "kube-system", "a", DURATION, PERIOD, clock=lambda: world.now)
    b = LeaderElector(
        http, "sched", "kube-system", "b", DURATION, PERIOD, clock=lambda: world.now, on_lead=lambda: calls.append(1)
    )
    assert a.step()
    assert not b.step()
    assert not calls
    a.release()
    assert b.step()
    assert calls == [1]
    for _ in range(3):
        world.now += PERIOD
        assert b.step()
    assert calls == [1]
